"""Large payloads live in the artifact store; history keeps a reference (Temporal external storage).

Temporal refuses payloads over 2 MB and slows down long before that, because every workflow task
replays the whole history. The data converter (ratchet/payloads/converter.py) therefore sets the
SDK's `temporalio.converter.ExternalStorage` with one driver, `ArtifactStorageDriver`: every
payload over RATCHET_CLAIM_CHECK_BYTES (after encryption: the SDK runs the payload codec first)
is serialized and put into Ratchet's `ArtifactStore`, and history keeps the SDK's reference
payload instead (`encoding: json/protobuf`, `messageType: temporal.api.sdk.v1.ExternalStorageReference`,
`{"driverName": "ratchet.artifacts", "claimData": {"digest": <sha256>}}`, the original's size in
`external_payloads`). Decoding fetches the blob; the store checks its digest. The store is
content-addressed and the serialization deterministic, so the same payload offloaded twice (a
retried activity, a replayed task) is one blob.

Every process that decodes such a payload must reach the same store: all workers, the clients that
read large results or query large state, `ratchet replay` and `ratchet codec-server`.

The store protocol is synchronous; the driver serializes, puts, gets and parses in a thread
(`asyncio.to_thread`), always. Measured on the directory store (local disk, a shared 2-core
machine): a put takes 2 ms at 256 KiB (the fsync), 5 ms at 1 MiB, 55 ms at 10 MiB; a get 0.35 /
1.3 / 10 ms. Called directly, all of that blocks the worker's event loop, and with it every
workflow activation and heartbeat of the process: the longest event-loop stall while offloading
and fetching back 300 KiB / 3 MiB payloads was 22-26 / 80 ms called directly, 9-15 / 22-63 ms in
a thread (the rest is the SDK's and the scheduler's, under load). The hop costs 0.13 ms on an idle
loop and 1-1.3 ms per payload under load (converter decode of 300 KiB: 1.4 ms direct, 2.6 ms in a
thread), a price paid only by payloads over the threshold. An S3 store does network I/O with
retries (seconds in the worst case), so a thread is the only option there, and one code path
serves both.

Why this driver also serves `s3://` artifact URLs, not the SDK's own
`temporalio.contrib.aws.s3driver.S3StorageDriver`: that driver would be a second code path for the
same behaviour (another client, aioboto3, another key layout `v0/ns/.../wi/.../d/sha256/...`, its
own credentials and checks), while `ObjectArtifactStore` already gives Ratchet one bucket layout,
integrity check on read, error messages naming RATCHET_ARTIFACT_URL, and the store conformance
suite, for transcripts and tool outputs as well as payloads. What the SDK driver would add:
claims that the S3 drivers of Temporal's other SDKs can read, which matters only if a worker or
client in another language decodes Ratchet's payloads; none does (Ratchet's workflow and
activities are Python, and the Web UI and CLI decode through `ratchet codec-server`, which uses
this driver), and with RATCHET_CODEC_KEYS set such a reader would need Ratchet's codec anyway.
If that changes, the SDK driver can be added under its own name beside this one (references name
their driver, so both kinds resolve). Decided: this driver only.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from google.protobuf.message import DecodeError
from temporalio.api.common.v1 import Payload
from temporalio.converter import (
    StorageDriver,
    StorageDriverClaim,
    StorageDriverRetrieveContext,
    StorageDriverStoreContext,
)

from ratchet.contracts import ArtifactRef
from ratchet.stores.artifacts import ArtifactMissing, ArtifactStore

DRIVER_NAME = "ratchet.artifacts"
"""The driver's name and type; every reference in history names it, so it never changes."""
MEDIA_TYPE = "application/x-temporal-payload"
"""Media type of an offloaded blob: a serialized `temporal.api.common.v1.Payload`."""


class OffloadedPayloadError(ValueError):
    """An offloaded payload cannot be brought back: its blob is missing or corrupt, or the claim
    is malformed."""


class ArtifactStorageDriver(StorageDriver):
    """A `temporalio.converter.StorageDriver` over an `ArtifactStore`: `store` puts each payload's
    serialized bytes and claims `{"digest": sha256}`; `retrieve` gets and parses them.

    `artifacts` is an `ArtifactStore` or a function that makes one; the function is called on first
    use, so processes that never meet a large payload never open the store."""

    def __init__(self, artifacts: ArtifactStore | Callable[[], ArtifactStore]) -> None:
        self._artifacts = artifacts if not callable(artifacts) else None
        self._make = artifacts if callable(artifacts) else None

    @property
    def artifacts(self) -> ArtifactStore:
        if self._artifacts is None:
            assert self._make is not None
            self._artifacts = self._make()
        return self._artifacts

    def name(self) -> str:
        return DRIVER_NAME

    def type(self) -> str:
        return DRIVER_NAME

    async def store(self, context: StorageDriverStoreContext, payloads: Sequence[Payload]) -> list[StorageDriverClaim]:
        store = self.artifacts  # made here, on the event loop's thread, not in several threads at once
        refs = await asyncio.gather(*(asyncio.to_thread(_write, store, p) for p in payloads))
        return [StorageDriverClaim(claim_data={"digest": ref.digest}) for ref in refs]

    async def retrieve(
        self, context: StorageDriverRetrieveContext, claims: Sequence[StorageDriverClaim]
    ) -> list[Payload]:
        store = self.artifacts
        refs = [_ref(claim) for claim in claims]
        return list(await asyncio.gather(*(asyncio.to_thread(_read, store, ref) for ref in refs)))


def _write(store: ArtifactStore, payload: Payload) -> ArtifactRef:
    """Serialize (deterministically: map fields sorted, so equal payloads are one blob) and put."""
    return store.put(payload.SerializeToString(deterministic=True), MEDIA_TYPE)


def _ref(claim: StorageDriverClaim) -> ArtifactRef:
    digest = claim.claim_data.get("digest")
    if not digest:
        raise OffloadedPayloadError(f"malformed {DRIVER_NAME} claim, no digest: {dict(claim.claim_data)!r}")
    return ArtifactRef(digest=digest, media_type=MEDIA_TYPE)


def _read(store: ArtifactStore, ref: ArtifactRef) -> Payload:
    try:
        data = store.get(ref)
    except (ArtifactMissing, ValueError) as exc:  # ArtifactCorrupt is an ArtifactMissing; ValueError: a bad digest
        raise OffloadedPayloadError(
            f"offloaded payload {ref.digest[:12]} cannot be read: {exc} (every worker and client must reach "
            "the workers' artifact store: RATCHET_ARTIFACT_DIR, or RATCHET_ARTIFACT_URL)"
        ) from None
    try:
        return Payload.FromString(data)
    except DecodeError:
        raise OffloadedPayloadError(f"blob {ref.digest[:12]} is not a serialized payload") from None
