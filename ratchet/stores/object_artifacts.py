"""The artifact store on an object store, for workers on several hosts: S3 or any S3-compatible
server (MinIO, SeaweedFS, Ceph RGW, R2, ...), Google Cloud Storage or Azure Blob Storage.

Each is configured as the service's own SDKs are:
- `s3://BUCKET[/PREFIX]`, S3: credentials from botocore's chain, as for the AWS CLI and boto3
  (ratchet/stores/aws_credentials.py: AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, AWS_PROFILE's
  profile in ~/.aws/config and ~/.aws/credentials with SSO, assumed roles and credential_process, a
  web identity, a container or instance role), handed to obstore as its credential provider;
  AWS_REGION / AWS_DEFAULT_REGION / the profile's region; AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL for
  a server that is not AWS; AWS_CA_BUNDLE. Requests to AWS are virtual-hosted-style
  (`BUCKET.s3.REGION.amazonaws.com`, AWS's recommendation; path-style is deprecated there) for a
  bucket name that can be a host name (no dots, no capitals), path-style otherwise and to an
  endpoint (S3-compatible servers); AWS_VIRTUAL_HOSTED_STYLE_REQUEST decides over both;
- `gs://BUCKET[/PREFIX]`, GCS: GOOGLE_APPLICATION_CREDENTIALS or GOOGLE_SERVICE_ACCOUNT (a key file),
  application default credentials, the instance's service account; GOOGLE_BASE_URL;
- `az://CONTAINER[/PREFIX]`, Azure: AZURE_STORAGE_ACCOUNT_NAME with AZURE_STORAGE_ACCOUNT_KEY,
  AZURE_STORAGE_SAS_TOKEN, a client secret (AZURE_CLIENT_ID, AZURE_CLIENT_SECRET, AZURE_TENANT_ID) or
  a managed identity; AZURE_STORAGE_ENDPOINT, AZURE_STORAGE_USE_EMULATOR.

Requests go through obstore (Python bindings of the Rust `object_store` crate, the Arrow project's):
it signs them, refreshes credentials, follows HTTPS_PROXY / NO_PROXY, and retries. A put of 1.5 KB
costs 0.4 ms of process CPU back to back and 0.8 ms at a step's pace (50 ms apart), against 0.9 /
1.2 ms for the SigV4 client Ratchet had written itself, 0.9 / 1.5 ms for botocore's SigV4Auth over
urllib3 and 2.4 / 2.9 ms for boto3 (SeaweedFS on loopback; its network work runs on obstore's own
threads, so a calling thread's clock sees only part of it). botocore's credentials do not change
that: obstore asks for them at most every 5 minutes (0.27-0.32 / 0.71-0.74 ms per put with them,
0.30-0.35 / 0.74 ms with obstore's own, interleaved in one process).
Needs the `s3` (or `gcs`, `azure`) extra: `pip install 'ratchet-agents[s3]'`.

Blobs live at `{prefix}/{digest[:2]}/{digest}`, the layout of `DirectoryArtifactStore`. Round trips:

- `put` of a blob under `head_first_bytes` (1 MiB): one conditional PUT (create only: S3's
  `If-None-Match: *`, GCS's `ifGenerationMatch=0`, Azure's `If-None-Match: *`); on S3 it carries
  the blob's sha256 (`x-amz-checksum-sha256`, so the server rejects bytes damaged on the way). An
  answer that the blob exists means done, nothing overwritten: content addressing makes it the same
  bytes. Existing small blobs are sent again; one request is cheaper than a HEAD and a PUT.
- `put` of a larger blob: a HEAD first (present: done, nothing uploaded), then the conditional PUT.
- `get`: one GET; the body's sha256 is checked against the digest.
- `digests`: one LIST per page (1000 keys on S3) under `{prefix}/`.
- `from_url`: one GET of a key that need not exist, to prove at start that the bucket exists and
  the credentials can read it (its error codes tell a missing bucket from a missing key; HEAD's do not).

A server that ignores conditional puts overwrites a blob with the same bytes, which is harmless
here. One that refuses them (501 Not Implemented, or AWS_CONDITIONAL_PUT=disabled) makes the handle
fall back to HEAD then PUT for every blob.

The credentials need read, write and list on the bucket (S3: s3:GetObject, s3:PutObject and
s3:ListBucket; without ListBucket, S3 answers 403 instead of 404 for a blob that is not there, and
a missing blob could not be told from a forbidden one); no delete. Calls run on the caller's thread.
An error answer (5xx, throttling) or no answer at all (refused, reset, timed out) is asked again
with backoff from 0.1 s to 1 s for up to `retry_timeout_s` (10 s, as the Postgres ledger waits for
a connection), so a store that restarts is waited out within one activity attempt; then the call
raises `ObjectStoreError` (retryable: the activity retries). 2 s to connect, 10 s per read.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Callable, Iterator
from typing import Any, Literal, TypeVar

import obstore
from obstore.exceptions import AlreadyExistsError, NotSupportedError, PermissionDeniedError, UnauthenticatedError

from ratchet.contracts import ArtifactRef
from ratchet.core.settings_errors import SettingsError
from ratchet.stores import object_errors as errors
from ratchet.stores.artifacts import DIGEST, ArtifactMissing, checked
from ratchet.stores.object_errors import ObjectStoreError
from ratchet.stores.object_store import FORMS, SCHEMES, SETTING, Location, open_object_store, parse_url

__all__ = ["FORMS", "SCHEMES", "Location", "ObjectArtifactStore", "ObjectStoreError", "open_object_store", "parse_url"]

_CONFLICT_RETRIES = 5
_EMPTY = hashlib.sha256(b"").hexdigest()
_T = TypeVar("_T")


class ObjectArtifactStore:
    """`ArtifactStore` on a bucket (an Azure container), under a key prefix. Safe to share between
    threads; several processes and hosts may use one bucket and prefix at once."""

    def __init__(self, location: Location, store: Any, *, head_first_bytes: int = 2**20) -> None:
        self.location = location
        self.store = store
        """obstore's store of the bucket (`open_object_store`)."""
        self.head_first_bytes = head_first_bytes
        self.conditional_put = True
        """False once the server refused conditional puts (then every put is HEAD, then PUT)."""

    @classmethod
    def from_url(cls, url: str, **config: Any) -> ObjectArtifactStore:
        """The store at RATCHET_ARTIFACT_URL `url`, checked with one request: a bad URL, missing
        configuration, a missing bucket, rejected credentials or an unreachable endpoint raise
        `SettingsError` naming RATCHET_ARTIFACT_URL, so a worker fails at start. `config` as for
        `open_object_store`."""
        location = parse_url(url)
        store = cls(location, open_object_store(location, **config))
        store.check()
        return store

    def __repr__(self) -> str:
        return f"ObjectArtifactStore({self.location.url()})"

    def key(self, digest: str) -> str:
        """The object key of a blob; ValueError if `digest` is not 64 lowercase hex characters."""
        if not isinstance(digest, str) or not DIGEST.fullmatch(digest):
            raise ValueError(f"not a sha256 digest: {digest!r}")
        prefix = self.location.prefix
        return f"{prefix}/{digest[:2]}/{digest}" if prefix else f"{digest[:2]}/{digest}"

    # the protocol

    def put(self, data: bytes, media_type: str = "application/octet-stream") -> ArtifactRef:
        digest = hashlib.sha256(data).hexdigest()
        key = self.key(digest)
        ref = ArtifactRef(digest=digest, size=len(data), media_type=media_type)
        if (len(data) >= self.head_first_bytes or not self.conditional_put) and self._exists(key):
            return ref
        conflicts = 0
        while True:
            mode: Literal["create", "overwrite"] = "create" if self.conditional_put else "overwrite"
            try:
                self._call("put", key, lambda: obstore.put(self.store, key, data, mode=mode, use_multipart=False))
                return ref
            except AlreadyExistsError as exc:
                if errors.error_code(exc) != "ConditionalRequestConflict":
                    return ref  # already there, and content addressing makes it the same bytes
                if conflicts == _CONFLICT_RETRIES:
                    raise self._error("put", key, exc) from None
                time.sleep(0.05 * 2**conflicts)  # S3's 409: a concurrent conditional put of the same key
                conflicts += 1
            except (NotSupportedError, ObjectStoreError) as exc:
                if not self.conditional_put or not (isinstance(exc, NotSupportedError) or exc.status == 501):
                    raise
                self.conditional_put = False  # the server refuses conditional puts: HEAD, then PUT
                if self._exists(key):
                    return ref

    def get(self, ref: ArtifactRef) -> bytes:
        key = self.key(ref.digest)
        try:
            data = bytes(self._call("get", key, lambda: obstore.get(self.store, key).bytes()))
        except FileNotFoundError as exc:
            if errors.error_code(exc) in errors.MISSING_BUCKET_CODES:
                raise ArtifactMissing(
                    f"artifact {ref.digest}: {self._bucket()} does not exist ({errors.failed_request(exc)})"
                ) from None
            raise ArtifactMissing(
                f"artifact {ref.digest} is not in {self.location.url(key)}; do all workers use the same {SETTING}?"
            ) from None
        return checked(ref, data, self.location.url(key))

    def digests(self) -> Iterator[str]:
        prefix = f"{self.location.prefix}/" if self.location.prefix else ""
        blob = re.compile(re.escape(prefix) + r"([0-9a-f]{2})/([0-9a-f]{64})")  # not a longer prefix's blobs
        pages = iter(obstore.list(self.store, prefix or None))
        while page := self._call("list", prefix, lambda: next(pages, None)):
            for meta in page:
                match = blob.fullmatch(meta["path"])
                if match and match[2].startswith(match[1]):
                    yield match[2]

    # the rest

    def check(self) -> None:
        """One request proving the bucket exists and the credentials may read it; SettingsError
        naming RATCHET_ARTIFACT_URL otherwise."""
        service = self.location.service
        try:
            obstore.get(self.store, self.key(_EMPTY))
            return
        except FileNotFoundError as exc:
            if errors.error_code(exc) not in errors.MISSING_BUCKET_CODES:
                return
            problem = f"{self._bucket()} does not exist ({errors.failed_request(exc)})"
        except obstore.exceptions.BaseError as exc:  # the message says what was answered
            code, where = errors.error_code(exc), errors.failed_request(exc)
            if _EMPTY not in where:  # not the bucket's answer: the credentials' source (a metadata service, STS)
                problem = f"no {service.name} credentials ({errors.summary(exc)}): {service.credentials}"
            elif code in errors.CREDENTIAL_CODES or isinstance(exc, UnauthenticatedError):
                source = getattr(self.store.credential_provider, "source", "the credentials")
                problem = f"{where} rejected {source} ({code}): {service.credentials}"
            elif isinstance(exc, PermissionDeniedError):
                problem = (
                    f"access to {self._bucket()} is denied ({code}, {where}): "
                    f"the credentials need {service.permissions}"
                )
            elif errors.http_status(exc) is None:
                why = errors.no_answer_reason(exc)
                problem = f"cannot reach {where} ({why}); is {service.endpoint} right, and is the server up?"
            else:
                problem = f"checking {self._bucket()} failed: {errors.describe(exc, service.permissions)}"
        raise SettingsError(f"{SETTING}={self.location.url()!r}: {problem}")

    def _bucket(self) -> str:
        return f"{self.location.service.bucket} {self.location.bucket!r}"

    def _exists(self, key: str) -> bool:
        try:
            self._call("head", key, lambda: obstore.head(self.store, key))
        except (FileNotFoundError, PermissionDeniedError):  # 403: no ListBucket, so unknown; the put decides
            return False
        return True

    def _call(self, op: str, key: str, call: Callable[[], _T]) -> _T:
        """`call()`, its obstore errors raised as `ObjectStoreError` naming `op` and `key`, but for
        those its caller decides on: an existing blob or an unsupported mode (put), a missing one
        (get, head), a forbidden one (head)."""
        try:
            return call()
        except (AlreadyExistsError, NotSupportedError):
            raise
        except (FileNotFoundError, PermissionDeniedError) as exc:
            if op == "head" or (op == "get" and isinstance(exc, FileNotFoundError)):
                raise
            raise self._error(op, key, exc) from None
        except obstore.exceptions.BaseError as exc:
            raise self._error(op, key, exc) from None

    def _error(self, op: str, key: str, exc: Exception) -> ObjectStoreError:
        service = self.location.service
        return ObjectStoreError(
            f"{service.name} {op} of {self.location.url(key)} failed: {errors.describe(exc, service.permissions)}",
            errors.http_status(exc),
        )
