"""The artifact store on S3 or any S3-compatible object store (MinIO, SeaweedFS, Ceph RGW, R2, ...),
for workers on several hosts: `RATCHET_ARTIFACT_URL=s3://bucket/prefix`.

Blobs live at `{prefix}/{digest[:2]}/{digest}`, the layout of `DirectoryArtifactStore`. Requests go
through `S3Client` (ratchet/stores/s3_client.py: SigV4 over a urllib3 pool, not boto3, which cost a
step 2-3 ms of worker CPU per put), configured from the usual AWS variables: the credential chain
(AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, a profile, a role), AWS_REGION / AWS_DEFAULT_REGION,
and AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL for an endpoint that is not AWS (path-style addressing
then). Needs the `s3` extra for botocore's credential chain: `pip install 'ratchet-agents[s3]'`.

Round trips:

- `put` of a blob under `head_first_bytes` (1 MiB): one conditional PUT (`If-None-Match: *`) that
  also carries the blob's sha256 (`x-amz-checksum-sha256`, so the server rejects bytes damaged on
  the way; the signature covers it too). A 412 means the blob is already there: done, nothing
  overwritten. Existing small blobs are sent again; one request is cheaper than a HEAD and a PUT.
  No `Expect: 100-continue` handshake (boto3 adds one to every PUT: a round trip).
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
attempts (connection errors, timeouts, 5xx, throttling) with 2 s connect and 10 s read timeouts,
then raises `S3StoreError` (retryable: the activity retries): a refused connection fails in under
a second, a host that does not answer in about 6 s, a server that accepts and never replies in
about 30 s.
"""

from __future__ import annotations

import base64
import hashlib
import re
import time
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

from ratchet.contracts import ArtifactRef
from ratchet.core.settings_errors import SettingsError
from ratchet.stores.artifacts import DIGEST, ArtifactCorrupt, ArtifactMissing
from ratchet.stores.s3_client import NoCredentials, Response, S3Client, Unreachable, client_from_env

__all__ = ["S3ArtifactStore", "S3StoreError", "parse_url"]

SETTING = "RATCHET_ARTIFACT_URL"
LIST_PAGE = 1000
"""Keys per ListObjectsV2 request (S3's maximum)."""

_BUCKET = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{1,253}[A-Za-z0-9]")
_EMPTY = hashlib.sha256(b"").hexdigest()
_CONFLICT_RETRIES = 5
_CREDENTIAL_CODES = ("InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken", "ExpiredToken")


class S3StoreError(Exception):
    """A request to the object store failed for a reason other than a missing or corrupt blob
    (network, 5xx, permissions). The message names the bucket, key and endpoint."""


class _Failed(Exception):
    """A request without a usable answer (unreachable, no credentials), for `_error` to name."""


class S3ArtifactStore:
    """`ArtifactStore` on an S3 bucket, under a key prefix. Safe to share between threads (the
    client is); several processes and hosts may use one bucket and prefix at once."""

    def __init__(
        self, bucket: str, prefix: str = "", *, client: S3Client | None = None, head_first_bytes: int = 2**20
    ) -> None:
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
        return self.client.endpoint

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
        headers = {
            "content-type": "application/octet-stream",
            "x-amz-checksum-sha256": base64.b64encode(sha.digest()).decode(),
        }
        conflicts = 0
        while True:
            conditional = self.conditional_put
            response = self._request(
                "put",
                "PUT",
                key,
                body=data,
                payload_sha256=digest,
                headers={**headers, "if-none-match": "*"} if conditional else headers,
            )
            status, code = response.status, response.code
            if status == 200 or status == 412 or code == "PreconditionFailed":
                return ref  # 412: already there, and content addressing makes it the same bytes
            if (status == 409 or code == "ConditionalRequestConflict") and conflicts < _CONFLICT_RETRIES:
                time.sleep(0.05 * 2**conflicts)  # a concurrent put of the same blob: ask again
                conflicts += 1
                continue
            if conditional and (status == 501 or code == "NotImplemented"):
                self.conditional_put = False  # the server refuses If-None-Match: HEAD, then PUT
                if self._exists(key):
                    return ref
                continue
            raise self._error("put", key, response)

    def get(self, ref: ArtifactRef) -> bytes:
        key = self.key(ref.digest)
        response = self._request("get", "GET", key)
        if response.code in ("NoSuchKey", "404"):
            raise ArtifactMissing(
                f"artifact {ref.digest} is not in s3://{self.bucket}/{key} ({self.endpoint}); "
                "do all workers use the same RATCHET_ARTIFACT_URL?"
            )
        if response.code == "NoSuchBucket":
            raise ArtifactMissing(f"artifact {ref.digest}: bucket {self.bucket!r} does not exist at {self.endpoint}")
        if response.status != 200:
            raise self._error("get", key, response)
        data = response.body
        actual = hashlib.sha256(data).hexdigest()
        if actual != ref.digest:
            raise ArtifactCorrupt(
                f"artifact {ref.digest} in s3://{self.bucket}/{key} is corrupt: its {len(data)} bytes hash to {actual}"
            )
        return data

    def digests(self) -> Iterator[str]:
        prefix = f"{self.prefix}/" if self.prefix else ""
        blob = re.compile(re.escape(prefix) + r"([0-9a-f]{2})/([0-9a-f]{64})")  # not a longer prefix's blobs
        query = {"list-type": "2", "prefix": prefix}
        while True:
            response = self._request("list", "GET", "", query=query)
            if response.status != 200:
                raise self._error("list", prefix, response)
            try:
                page = ElementTree.fromstring(response.body)
            except ElementTree.ParseError as exc:
                raise S3StoreError(
                    f"S3 list of s3://{self.bucket}/{prefix} at {self.endpoint}: the answer is not a listing ({exc})"
                ) from None
            for key in page.iterfind("{*}Contents/{*}Key"):
                match = blob.fullmatch(key.text or "")
                if match and match[2].startswith(match[1]):
                    yield match[2]
            token = page.findtext("{*}NextContinuationToken")
            if page.findtext("{*}IsTruncated") != "true" or not token:
                return
            query = {**query, "continuation-token": token}

    # the rest

    def check(self, url: str | None = None) -> None:
        """One request proving the bucket exists and the credentials may read it; SettingsError
        naming RATCHET_ARTIFACT_URL otherwise."""
        where = f"{SETTING}={url or f's3://{self.bucket}/{self.prefix}'}"
        try:
            response = self.client.request("GET", self.bucket, self.key(_EMPTY))
        except NoCredentials as exc:
            problem = f"{exc}: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE)"
        except Unreachable as exc:
            problem = (
                f"cannot reach {self.endpoint} ({exc}); is AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL right,"
                " and is the server up?"
            )
        else:
            code, status = response.code, response.status
            if status == 200 or code == "NoSuchKey":
                return
            if code in ("NoSuchBucket", "404"):
                problem = f"bucket {self.bucket!r} does not exist at {self.endpoint}"
            elif code in _CREDENTIAL_CODES:
                problem = (
                    f"{self.endpoint} rejected the credentials ({code}): check AWS_ACCESS_KEY_ID and "
                    "AWS_SECRET_ACCESS_KEY (or the AWS profile in use)"
                )
            elif code == "AccessDenied" or status == 403:
                problem = (
                    f"access to bucket {self.bucket!r} at {self.endpoint} is denied ({code}): "
                    "the credentials need s3:GetObject, s3:PutObject and s3:ListBucket on it"
                )
            else:
                problem = f"checking bucket {self.bucket!r} at {self.endpoint} failed: {_detail(response)}"
        raise SettingsError(f"{where}: {problem}")

    def _exists(self, key: str) -> bool:
        response = self._request("head", "HEAD", key)
        if response.status in (403, 404):  # 403: no ListBucket, so unknown; the put decides
            return False
        if response.status != 200:
            raise self._error("head", key, response)
        return True

    def _request(self, op: str, method: str, key: str, **kwargs: Any) -> Response:
        """The client's answer; S3StoreError naming `op` and `key` when there is none."""
        try:
            return self.client.request(method, self.bucket, key, **kwargs)
        except (Unreachable, NoCredentials) as exc:
            raise self._error(op, key or kwargs.get("query", {}).get("prefix", ""), exc) from None

    def _error(self, op: str, key: str, failure: Response | Exception) -> S3StoreError:
        if isinstance(failure, Response):
            detail = _detail(failure)
        else:
            detail = f"no answer ({failure})" if isinstance(failure, Unreachable) else str(failure)
        return S3StoreError(f"S3 {op} of s3://{self.bucket}/{key} at {self.endpoint} failed: {detail}")


def _detail(response: Response) -> str:
    """An error answer as `Code (HTTP status)`, with what to do about the usual ones."""
    detail = f"{response.code} (HTTP {response.status})"
    if response.status == 403:
        detail += "; the credentials need s3:GetObject, s3:PutObject and s3:ListBucket on the bucket"
    elif response.status == 301 or response.code in ("PermanentRedirect", "AuthorizationHeaderMalformed"):
        detail += "; is the bucket in another region? Set AWS_REGION to its region"
    return detail


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
