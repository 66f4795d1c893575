"""The artifact store on S3 or any S3-compatible object store (MinIO, SeaweedFS, Ceph RGW, R2, ...),
for workers on several hosts: `RATCHET_ARTIFACT_URL=s3://bucket/prefix`.

Blobs live at `{prefix}/{digest[:2]}/{digest}`, the layout of `DirectoryArtifactStore`. The client
is boto3 (sync, as the protocol is), configured from the usual AWS variables: AWS_ACCESS_KEY_ID /
AWS_SECRET_ACCESS_KEY (or any other source of boto3's credential chain), AWS_REGION /
AWS_DEFAULT_REGION, and AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL for an endpoint that is not AWS
(path-style addressing then). Needs the `s3` extra: `pip install 'ratchet-agents[s3]'`.

Round trips:

- `put` of a blob under `head_first_bytes` (1 MiB): one conditional PUT (`If-None-Match: *`) that
  also carries the blob's sha256 (`x-amz-checksum-sha256`, so the server rejects bytes damaged on
  the way). A 412 means the blob is already there: done, nothing overwritten. Existing small blobs
  are sent again; one request is cheaper than a HEAD and a PUT.
- `put` of a larger blob: a HEAD first (present: done, nothing uploaded), then the conditional PUT.
- `get`: one GET; the body's sha256 is checked against the digest.
- `digests`: one LIST per 1000 blobs (ListObjectsV2 under `{prefix}/`).
- `from_url`: one GET of a key that need not exist, to prove at start that the bucket exists and
  the credentials can read it (its error codes tell a missing bucket from a bad key; HEAD's do not).

A server that ignores `If-None-Match` overwrites a blob with the same bytes, which is harmless here.
One that refuses it (501 NotImplemented) makes the handle fall back to HEAD then PUT for every blob.

The credentials need s3:GetObject, s3:PutObject and s3:ListBucket on the bucket: without
ListBucket, S3 answers 403 instead of 404 for a blob that is not there, and a missing blob could
not be told from a forbidden one. Calls run on the caller's thread. A request makes at most three
attempts (botocore's standard retry mode) with 2 s connect and 10 s read timeouts, then raises
`S3StoreError` (retryable: the activity retries): a refused connection fails in about a second, a
host that does not answer in under 10 s, a server that accepts and never replies in about 30 s.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import threading
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

from ratchet.contracts import ArtifactRef
from ratchet.ops.settings import SettingsError
from ratchet.stores.artifacts import DIGEST, ArtifactCorrupt, ArtifactMissing

__all__ = ["S3ArtifactStore", "S3StoreError", "client_from_env", "parse_url"]

SETTING = "RATCHET_ARTIFACT_URL"
CONNECT_TIMEOUT_S = 2.0
READ_TIMEOUT_S = 10.0
MAX_ATTEMPTS = 3
"""Attempts per request, the first included (botocore's standard mode: connection errors,
timeouts, 5xx, throttling)."""

_BUCKET = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{1,253}[A-Za-z0-9]")
_EMPTY = hashlib.sha256(b"").hexdigest()
_CONFLICT_RETRIES = 5


class S3StoreError(Exception):
    """A request to the object store failed for a reason other than a missing or corrupt blob
    (network, 5xx, permissions). The message names the bucket, key and endpoint."""


def _need_boto3() -> Any:
    try:
        import boto3
    except ImportError:
        raise SettingsError(
            f"{SETTING}: an s3:// URL needs boto3: pip install 'ratchet-agents[s3]'"
        ) from None
    return boto3


def _env(*names: str) -> str | None:
    for name in names:
        if os.environ.get(name):
            return os.environ[name]
    return None


_CLIENT_VARIABLES = (
    "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE",
)
_clients: dict[str, Any] = {}
_clients_lock = threading.Lock()


def client_from_env() -> Any:
    """A boto3 S3 client from the AWS variables, with Ratchet's timeouts and retries. Shared by
    every store opened under the same variables (boto3 clients are thread-safe; making one takes
    about 0.2 s)."""
    variables = [os.getpid()] + [os.environ.get(name) for name in _CLIENT_VARIABLES]  # no pool across a fork
    settings = hashlib.sha256(repr(variables).encode()).hexdigest()
    with _clients_lock:
        client = _clients.get(settings)
        if client is None:
            client = _clients[settings] = _new_client()
        return client


def _new_client() -> Any:
    boto3 = _need_boto3()
    from botocore.config import Config

    endpoint = _env("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")
    config = Config(
        connect_timeout=CONNECT_TIMEOUT_S,
        read_timeout=READ_TIMEOUT_S,
        retries={"mode": "standard", "total_max_attempts": MAX_ATTEMPTS},
        max_pool_connections=32,
        # Ratchet sends the sha256 it already has; no extra CRC (which some S3-compatible servers
        # reject), and get checks the sha256 itself.
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
        s3={"addressing_style": "path"} if endpoint else None,
        user_agent_extra="ratchet",
    )
    return boto3.session.Session().client(
        "s3", endpoint_url=endpoint, region_name=_env("AWS_REGION", "AWS_DEFAULT_REGION"), config=config
    )


def _response(exc: Exception) -> dict[str, Any]:
    response = getattr(exc, "response", None)  # a ClientError's parsed answer; None or absent otherwise
    return response if isinstance(response, dict) else {}


def _code(exc: Exception) -> str:
    return str(_response(exc).get("Error", {}).get("Code", ""))


def _status(exc: Exception) -> int:
    return int(_response(exc).get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)


class S3ArtifactStore:
    """`ArtifactStore` on an S3 bucket, under a key prefix. Safe to share between threads (boto3
    clients are); several processes and hosts may use one bucket and prefix at once."""

    def __init__(self, bucket: str, prefix: str = "", *, client: Any = None,
                 head_first_bytes: int = 2**20) -> None:
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.client = client if client is not None else client_from_env()
        self.head_first_bytes = head_first_bytes
        self.conditional_put = True
        """False once the server refused `If-None-Match` (then every put is HEAD, then PUT)."""

    @classmethod
    def from_url(cls, url: str) -> S3ArtifactStore:
        """The store at `s3://bucket[/prefix]` (RATCHET_ARTIFACT_URL), checked with one request:
        a bad URL, a missing bucket, rejected credentials or an unreachable endpoint raise
        `SettingsError` naming RATCHET_ARTIFACT_URL, so a worker fails at start."""
        bucket, prefix = parse_url(url)
        store = cls(bucket, prefix)
        store.check(url)
        return store

    def __repr__(self) -> str:
        return f"S3ArtifactStore(s3://{self.bucket}/{self.prefix}, endpoint={self.endpoint})"

    @property
    def endpoint(self) -> str:
        return str(self.client.meta.endpoint_url)

    def key(self, digest: str) -> str:
        """The object key of a blob; ValueError if `digest` is not 64 lowercase hex characters."""
        if not isinstance(digest, str) or not DIGEST.fullmatch(digest):
            raise ValueError(f"not a sha256 digest: {digest!r}")
        return f"{self.prefix}/{digest[:2]}/{digest}" if self.prefix else f"{digest[:2]}/{digest}"

    # the protocol

    def put(self, data: bytes, media_type: str = "application/octet-stream") -> ArtifactRef:
        sha = hashlib.sha256(data)
        digest = sha.hexdigest()
        key = self.key(digest)
        ref = ArtifactRef(digest=digest, size=len(data), media_type=media_type)
        if (len(data) >= self.head_first_bytes or not self.conditional_put) and self._exists(key):
            return ref
        checksum = base64.b64encode(sha.digest()).decode()
        conflicts = 0
        while True:
            try:
                self._put(key, data, checksum)
                return ref
            except Exception as exc:
                code, status = _code(exc), _status(exc)
                if status == 412 or code == "PreconditionFailed":
                    return ref  # already there: content addressing makes it the same bytes
                if (status == 409 or code == "ConditionalRequestConflict") and conflicts < _CONFLICT_RETRIES:
                    time.sleep(0.05 * 2**conflicts)  # a concurrent put of the same blob: ask again
                    conflicts += 1
                    continue
                if self.conditional_put and (status == 501 or code == "NotImplemented"):
                    self.conditional_put = False  # the server refuses If-None-Match: HEAD, then PUT
                    if self._exists(key):
                        return ref
                    continue
                raise self._error("put", key, exc) from exc

    def get(self, ref: ArtifactRef) -> bytes:
        key = self.key(ref.digest)
        try:
            response = self.client.get_object(Bucket=self.bucket, Key=key)
            data = response["Body"].read()
        except Exception as exc:
            code = _code(exc)
            if code in ("NoSuchKey", "404"):
                raise ArtifactMissing(
                    f"artifact {ref.digest} is not in s3://{self.bucket}/{key} ({self.endpoint}); "
                    "do all workers use the same RATCHET_ARTIFACT_URL?"
                ) from None
            if code == "NoSuchBucket":
                raise ArtifactMissing(
                    f"artifact {ref.digest}: bucket {self.bucket!r} does not exist at {self.endpoint}"
                ) from None
            raise self._error("get", key, exc) from exc
        actual = hashlib.sha256(data).hexdigest()
        if actual != ref.digest:
            raise ArtifactCorrupt(
                f"artifact {ref.digest} in s3://{self.bucket}/{key} is corrupt: its {len(data)} bytes "
                f"hash to {actual}"
            )
        return data

    def digests(self) -> Iterator[str]:
        prefix = f"{self.prefix}/" if self.prefix else ""
        blob = re.compile(re.escape(prefix) + r"([0-9a-f]{2})/([0-9a-f]{64})")  # not a longer prefix's blobs
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix)
        try:
            for page in pages:
                for item in page.get("Contents", []):
                    match = blob.fullmatch(item["Key"])
                    if match and match[2].startswith(match[1]):
                        yield match[2]
        except Exception as exc:
            raise self._error("list", prefix, exc) from exc

    # the rest

    def check(self, url: str | None = None) -> None:
        """One request proving the bucket exists and the credentials may read it; SettingsError
        naming RATCHET_ARTIFACT_URL otherwise."""
        where = f"{SETTING}={url or f's3://{self.bucket}/{self.prefix}'}"
        key = self.key(_EMPTY)
        try:
            self.client.get_object(Bucket=self.bucket, Key=key)
            return
        except Exception as exc:
            code, status, name = _code(exc), _status(exc), type(exc).__name__
            if code == "NoSuchKey":
                return
            if code in ("NoSuchBucket", "404") or (status == 404 and not code):
                problem = f"bucket {self.bucket!r} does not exist at {self.endpoint}"
            elif code in ("InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken", "ExpiredToken"):
                problem = (f"{self.endpoint} rejected the credentials ({code}): check AWS_ACCESS_KEY_ID and "
                           "AWS_SECRET_ACCESS_KEY (or the AWS profile in use)")
            elif code in ("AccessDenied", "403") or status == 403:
                problem = (f"access to bucket {self.bucket!r} at {self.endpoint} is denied ({code or status}): "
                           "the credentials need s3:GetObject, s3:PutObject and s3:ListBucket on it")
            elif name in ("NoCredentialsError", "PartialCredentialsError"):
                problem = f"no AWS credentials found ({exc}): set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
            elif name in ("EndpointConnectionError", "ConnectTimeoutError", "ReadTimeoutError",
                          "ConnectionClosedError", "ProxyConnectionError", "SSLError"):
                problem = (f"cannot reach {self.endpoint} ({exc}); is AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL "
                           "right, and is the server up?")
            else:
                problem = f"checking bucket {self.bucket!r} at {self.endpoint} failed: {name}: {exc}"
            raise SettingsError(f"{where}: {problem}") from exc

    def _exists(self, key: str) -> bool:
        try:
            self.client.head_object(Bucket=self.bucket, Key=key)
            return True
        except Exception as exc:
            if _status(exc) in (403, 404):  # 403: no ListBucket, so unknown; the put decides
                return False
            raise self._error("head", key, exc) from exc

    def _put(self, key: str, data: bytes, checksum: str) -> None:
        extra = {"IfNoneMatch": "*"} if self.conditional_put else {}
        self.client.put_object(Bucket=self.bucket, Key=key, Body=data, ChecksumSHA256=checksum,
                               ContentType="application/octet-stream", **extra)

    def _error(self, op: str, key: str, exc: Exception) -> S3StoreError:
        code = _code(exc)
        detail = f"{code} (HTTP {_status(exc)})" if code else f"{type(exc).__name__}: {exc}"
        hint = ""
        if _status(exc) == 403:
            hint = "; the credentials need s3:GetObject, s3:PutObject and s3:ListBucket on the bucket"
        return S3StoreError(f"S3 {op} of s3://{self.bucket}/{key} at {self.endpoint} failed: {detail}{hint}")


def parse_url(url: str) -> tuple[str, str]:
    """`s3://bucket[/prefix]` -> (bucket, prefix without surrounding slashes); SettingsError naming
    RATCHET_ARTIFACT_URL for anything else."""

    shown = re.sub(r"(?<=://)[^/@]*@", "***@", url)  # never echo a secret put in the URL

    def bad(why: str) -> SettingsError:
        return SettingsError(f"{SETTING}={shown!r}: {why}; expected s3://bucket or s3://bucket/prefix")

    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise bad(str(exc)) from None
    if parts.scheme != "s3":
        raise bad("not an s3:// URL")
    if parts.query or parts.fragment or "?" in url or "#" in url:
        raise bad("no query or fragment allowed (the endpoint and region come from AWS_* variables)")
    if "@" in parts.netloc or ":" in parts.netloc:
        raise bad("no credentials or port in the URL (they come from AWS_* variables)")
    bucket = parts.netloc
    if not _BUCKET.fullmatch(bucket):
        raise bad(f"{bucket!r} is not a bucket name")
    prefix = parts.path.strip("/")
    if prefix:
        segments = prefix.split("/")
        if any(s in ("", ".", "..") for s in segments) or any(ord(c) < 32 for c in prefix):
            raise bad(f"prefix {prefix!r} has an empty, '.' or '..' segment or a control character")
    return bucket, prefix
