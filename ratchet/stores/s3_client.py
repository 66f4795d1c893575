"""The S3 requests of the artifact store: SigV4-signed HTTP over a urllib3 connection pool.

`S3ArtifactStore` (ratchet/stores/s3_artifacts.py) needs four S3 operations (GetObject, PutObject,
HeadObject, ListObjectsV2), and a step puts a transcript segment or two. Through boto3 a put of
1.5 KB cost 1.7-2.3 ms of CPU back to back and 3.0-3.4 ms at a step's pace (50 ms apart: the
interpreter's caches go cold between calls, and boto3 runs a lot of code per request: event hooks,
parameter validation, the endpoint rule set, its own header classes), 2.7 ms per put in a bench
worker, which made a step on S3 and Postgres cost 24-44% more worker CPU than on a directory and
SQLite (bench `scaleout_worker_cpu_ratio`). This client signs and sends the request itself:
0.6-0.7 / 1.3 ms per put, 1.0-1.1 ms in a bench worker (the directory store: 0.2 / 0.8 ms). It also
skips the `Expect: 100-continue` handshake boto3 adds to every PUT, a round trip per put.

What it keeps from the AWS SDK: the credential chain (botocore's: AWS_ACCESS_KEY_ID /
AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN, AWS_PROFILE and the shared files, SSO, web identity,
container and instance roles, refreshed before they expire), the region from AWS_REGION,
AWS_DEFAULT_REGION or the profile (default us-east-1), the endpoint from AWS_ENDPOINT_URL_S3 or
AWS_ENDPOINT_URL (path-style addressing then; on AWS itself virtual-hosted for bucket names
without dots), AWS_CA_BUNDLE for a private certificate authority (else botocore's bundle). What it
does not do: HTTP proxies (HTTPS_PROXY is ignored; reach the endpoint directly or through a VPC
endpoint), following a bucket's region (a bucket in another region answers
PermanentRedirect / AuthorizationHeaderMalformed: set AWS_REGION to its region), other AWS
partitions without an endpoint variable (set AWS_ENDPOINT_URL_S3 for China or GovCloud).

Every request is signed with AWS Signature Version 4 over the whole request, the payload's sha256
included. An answer of HTTP 500, 502, 503 or 504 or a throttling answer is asked again, at most
MAX_ATTEMPTS attempts in all, with jittered exponential backoff (under a second in all). No answer
at all (refused, reset, timed out) is asked again for up to `unreachable_wait_s` (UNREACHABLE_WAIT_S,
10 s, as the Postgres ledger waits for a connection), so a store that restarts is waited out within
one activity attempt instead of using up the tool's own attempts. 2 s connect and 10 s read timeouts
per attempt. Thread-safe: one client serves every thread
of a process (the pool keeps up to POOL_SIZE connections per host alive between requests).
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import os
import random
import re
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit

from ratchet.core.settings_errors import SettingsError

__all__ = [
    "EMPTY_SHA256",
    "NoCredentials",
    "Response",
    "S3Client",
    "Unreachable",
    "canonical_query",
    "client_from_env",
    "sign",
    "signing_key",
]

CONNECT_TIMEOUT_S = 2.0
READ_TIMEOUT_S = 10.0
MAX_ATTEMPTS = 3
"""Attempts per request that got an error answer, the first included."""
UNREACHABLE_WAIT_S = 10.0
"""How long a request that gets no answer is asked again before it raises `Unreachable`."""
UNREACHABLE_BACKOFF_MAX_S = 1.0
BACKOFF_S = 0.1
"""The first retry waits up to this long, the second up to twice as long (jittered)."""
POOL_SIZE = 32
"""Connections kept alive per host (more threads than this open extra ones, closed after use)."""
RETRY_STATUSES = frozenset({500, 502, 503, 504})
THROTTLED = frozenset(
    {
        "SlowDown",
        "Throttling",
        "ThrottlingException",
        "RequestLimitExceeded",
        "TooManyRequestsException",
        "RequestThrottled",
        "RequestTimeout",
    }
)
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
_UNRESERVED = "-_.~"
_DNS_BUCKET = re.compile(r"[a-z0-9][a-z0-9-]{1,61}[a-z0-9]")


class Unreachable(Exception):
    """No answer from the endpoint after MAX_ATTEMPTS attempts (refused, reset, timed out, TLS
    failure); the message says what the last attempt met."""


class NoCredentials(Exception):
    """botocore's credential chain found no AWS credentials."""


@dataclass(frozen=True)
class Response:
    status: int
    headers: Mapping[str, str]
    body: bytes

    @property
    def code(self) -> str:
        """The S3 error code of the XML error body, or the status as text when there is none (a
        HEAD's answer has no body): botocore's convention, so "404" and "NoSuchKey" both mean
        missing."""
        found = re.search(rb"<Code>([^<]*)</Code>", self.body) if self.status >= 300 else None
        return found[1].decode(errors="replace") if found else str(self.status)


def sign(
    method: str,
    host: str,
    path: str,
    query: str,
    headers: Mapping[str, str],
    payload_sha256: str,
    access_key: str,
    signing_key: bytes,
    region: str,
    amz_date: str,
) -> str:
    """The Authorization header of a request signed with SigV4 for service s3: `path` and `query`
    as sent (already encoded), `headers` the other headers to sign (lowercase names; host,
    x-amz-date and x-amz-content-sha256 are added here), `signing_key` from `signing_key()`."""
    signed = {**headers, "host": host, "x-amz-content-sha256": payload_sha256, "x-amz-date": amz_date}
    names = sorted(signed)
    canonical = "\n".join(
        [
            method,
            path,
            query,
            *(f"{name}:{str(signed[name]).strip()}" for name in names),
            "",
            ";".join(names),
            payload_sha256,
        ]
    )
    scope = f"{amz_date[:8]}/{region}/s3/aws4_request"
    to_sign = f"AWS4-HMAC-SHA256\n{amz_date}\n{scope}\n{hashlib.sha256(canonical.encode()).hexdigest()}"
    signature = hmac.new(signing_key, to_sign.encode(), hashlib.sha256).hexdigest()
    return f"AWS4-HMAC-SHA256 Credential={access_key}/{scope}, SignedHeaders={';'.join(names)}, Signature={signature}"


def signing_key(secret_key: str, date: str, region: str) -> bytes:
    """SigV4's key for one day (`date` as YYYYMMDD), region and service s3."""
    key = f"AWS4{secret_key}".encode()
    for part in (date, region, "s3", "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return key


def canonical_query(params: Mapping[str, str]) -> str:
    """The canonical query string (sorted, every reserved character encoded), sent as it is."""
    return "&".join(f"{quote(k, safe=_UNRESERVED)}={quote(v, safe=_UNRESERVED)}" for k, v in sorted(params.items()))


@dataclass(frozen=True)
class _Target:
    """Where a bucket's requests go: the pool, the Host header, and the path before the key."""

    pool: Any
    host: str
    base_path: str


class S3Client:
    """Signed S3 requests to `endpoint` (None: AWS in `region`) with `credentials` (a botocore
    credentials object, or None when the chain found none: every request then raises
    NoCredentials)."""

    def __init__(
        self,
        endpoint: str | None,
        region: str,
        credentials: Any,
        *,
        ca_bundle: str | None = None,
        unreachable_wait_s: float = UNREACHABLE_WAIT_S,
    ) -> None:
        import urllib3

        self.unreachable_wait_s = unreachable_wait_s
        self.region = region
        self.credentials = credentials
        self.endpoint = (endpoint or f"https://s3.{region}.amazonaws.com").rstrip("/")
        self.path_style = endpoint is not None
        parts = urlsplit(self.endpoint)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) endpoint URL: {self.endpoint!r}")
        self._scheme, self._netloc, self._path = parts.scheme, parts.netloc, parts.path.rstrip("/")
        tls: dict[str, Any] = {"ca_certs": ca_bundle or _default_ca_bundle()} if parts.scheme == "https" else {}
        self._pools = urllib3.PoolManager(
            num_pools=8,
            maxsize=POOL_SIZE,
            block=False,
            retries=False,
            timeout=urllib3.Timeout(connect=CONNECT_TIMEOUT_S, read=READ_TIMEOUT_S),
            **tls,
        )
        self._targets: dict[str, _Target] = {}
        self._keys: tuple[str, str, bytes] = ("", "", b"")

    def __repr__(self) -> str:
        return f"S3Client({self.endpoint}, region={self.region})"

    def request(
        self,
        method: str,
        bucket: str,
        key: str = "",
        *,
        query: Mapping[str, str] | None = None,
        body: bytes | None = None,
        payload_sha256: str = EMPTY_SHA256,
        headers: Mapping[str, str] | None = None,
    ) -> Response:
        """One S3 request, retried as the module docstring says. Any answer is returned (the
        caller decides what a status means); no answer raises Unreachable."""
        target = self._target(bucket)
        path = self._path_of(target, key)
        query_string = canonical_query(query or {})
        url = f"{path}?{query_string}" if query_string else path
        answered, unanswered, give_up_at = 0, 0, None
        while True:
            sent = self.signed_headers(method, target.host, path, query_string, headers or {}, payload_sha256)
            try:
                answer = target.pool.urlopen(
                    method, url, body=body, headers=sent, redirect=False, assert_same_host=False, preload_content=True
                )
            except Exception as exc:  # urllib3's HTTPError: refused, reset, timed out, TLS
                if not _is_transport_error(exc):
                    raise
                give_up_at = give_up_at or time.monotonic() + self.unreachable_wait_s
                if time.monotonic() >= give_up_at:
                    raise Unreachable(f"{type(exc).__name__}: {exc}") from None
                unanswered += 1
                time.sleep(min(random.uniform(0.5, 1.0) * BACKOFF_S * 2 ** (unanswered - 1), UNREACHABLE_BACKOFF_MAX_S))
                continue
            response = Response(answer.status, answer.headers, answer.data)
            answered += 1
            if answered < MAX_ATTEMPTS and (response.status in RETRY_STATUSES or response.code in THROTTLED):
                time.sleep(random.uniform(0.5, 1.0) * BACKOFF_S * 2 ** (answered - 1))
                continue
            return response

    def signed_headers(
        self,
        method: str,
        host: str,
        path: str,
        query: str,
        headers: Mapping[str, str],
        payload_sha256: str,
        amz_date: str | None = None,
    ) -> dict[str, str]:
        """`headers` and the ones that sign the request (at `amz_date`, default now): what is sent."""
        if self.credentials is None:
            raise NoCredentials("no AWS credentials found")
        frozen = self.credentials.get_frozen_credentials()  # refreshed first if about to expire
        if not frozen.access_key or not frozen.secret_key:
            raise NoCredentials("the AWS credentials found have no access key or secret key")
        amz_date = amz_date or datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
        out = dict(headers)
        if frozen.token:
            out["x-amz-security-token"] = frozen.token
        out["authorization"] = sign(
            method,
            host,
            path,
            query,
            out,
            payload_sha256,
            frozen.access_key,
            self._signing_key(frozen.secret_key, amz_date[:8]),
            self.region,
            amz_date,
        )
        out.update({"host": host, "x-amz-date": amz_date, "x-amz-content-sha256": payload_sha256})
        return out

    def url(self, bucket: str, key: str = "") -> str:
        """Where a request for `key` in `bucket` goes (without a query)."""
        target = self._target(bucket)
        return f"{target.pool.scheme}://{target.host}{self._path_of(target, key)}"

    def _signing_key(self, secret_key: str, date: str) -> bytes:
        secret, day, key = self._keys
        if (secret, day) != (secret_key, date):
            key = signing_key(secret_key, date, self.region)
            self._keys = (secret_key, date, key)  # one tuple: threads see the old or the new one whole
        return key

    @staticmethod
    def _path_of(target: _Target, key: str) -> str:
        return f"{target.base_path}/{quote(key, safe='/' + _UNRESERVED)}" if key else target.base_path or "/"

    def _target(self, bucket: str) -> _Target:
        target = self._targets.get(bucket)
        if target is None:
            if self.path_style or "." in bucket or not _DNS_BUCKET.fullmatch(bucket):
                netloc, base_path = self._netloc, f"{self._path}/{quote(bucket, safe=_UNRESERVED)}"
            else:  # AWS without an endpoint variable: virtual-hosted, as boto3 addresses it
                netloc, base_path = f"{bucket}.{self._netloc}", self._path
            pool = self._pools.connection_from_url(f"{self._scheme}://{netloc}")
            target = self._targets[bucket] = _Target(pool, netloc, base_path)
        return target


def _is_transport_error(exc: Exception) -> bool:
    import urllib3.exceptions

    return isinstance(exc, (urllib3.exceptions.HTTPError, OSError))


def _default_ca_bundle() -> str:
    from botocore.httpsession import get_cert_path

    return str(get_cert_path(True))


def _env(*names: str) -> str | None:
    for name in names:
        if os.environ.get(name):
            return os.environ[name]
    return None


_CLIENT_VARIABLES = (
    "AWS_ENDPOINT_URL_S3",
    "AWS_ENDPOINT_URL",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_CONFIG_FILE",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_CA_BUNDLE",
)
_clients: dict[tuple[Any, ...], S3Client] = {}
_clients_lock = threading.Lock()


def client_from_env() -> S3Client:
    """The client of the AWS variables (see the module docstring), shared by every store opened
    under the same variables in this process (one connection pool; a fork gets its own)."""
    settings = (os.getpid(), *(os.environ.get(name) for name in _CLIENT_VARIABLES))
    with _clients_lock:
        client = _clients.get(settings)
        if client is None:
            client = _clients[settings] = _new_client()
        return client


def _new_client() -> S3Client:
    try:
        from botocore.session import Session
    except ImportError:
        raise SettingsError(
            "RATCHET_ARTIFACT_URL: an s3:// URL needs botocore (the AWS credential chain): "
            "pip install 'ratchet-agents[s3]'"
        ) from None
    session = Session()
    region = _env("AWS_REGION", "AWS_DEFAULT_REGION") or session.get_config_variable("region") or "us-east-1"
    return S3Client(
        _env("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"),
        region,
        session.get_credentials(),
        ca_bundle=_env("AWS_CA_BUNDLE"),
        unreachable_wait_s=UNREACHABLE_WAIT_S,
    )
