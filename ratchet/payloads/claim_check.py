"""Claim check: payloads over a size threshold live in the artifact store; history keeps a reference.

Temporal refuses payloads over 2 MB and slows down long before that, because every workflow task
replays the whole history. This codec replaces each payload larger than RATCHET_CLAIM_CHECK_BYTES
with a small one, `encoding: binary/claim-check`, whose data is the `ArtifactRef` (sha256 digest
and size) of the serialized original in the artifact store. Decoding fetches the blob and checks
its digest. The store is content-addressed, so the same payload offloaded twice (a retried
activity, a replayed task) is stored once.

Every process that decodes such a payload must reach the same store: all workers, and clients
that read large results or query large state (`RATCHET_ARTIFACT_DIR` on a shared volume).

In the data converter this codec runs *after* encryption (ratchet/payloads/converter.py): with
RATCHET_CODEC_KEYS set, the store holds only ciphertext, exactly what history would have held.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from google.protobuf.message import DecodeError
from pydantic import ValidationError
from temporalio.api.common.v1 import Payload
from temporalio.converter import PayloadCodec

from ratchet.stores.artifacts import ArtifactMissing, ArtifactStore
from ratchet.contracts import ArtifactRef

ENCODING = b"binary/claim-check"
MEDIA_TYPE = "application/x-temporal-payload"
"""Media type of an offloaded blob: a serialized `temporal.api.common.v1.Payload`."""
ASYNC_IO_BYTES = 1024 * 1024
"""Blobs at least this big are written and read in a thread, off the worker's event loop."""


class ClaimCheckError(ValueError):
    """A claim-check reference cannot be resolved (blob missing, corrupt, or a bad reference)."""


class ClaimCheckCodec(PayloadCodec):
    """Offloads payloads over `threshold` bytes to an artifact store and fetches them back.

    `store` is an `ArtifactStore` or a function that makes one; the function is called on first
    use, so processes that never meet a large payload never touch the store's directory.
    """

    def __init__(self, store: ArtifactStore | Callable[[], ArtifactStore], threshold: int) -> None:
        if threshold < 1:
            raise ValueError("claim-check threshold must be at least 1 byte")
        self.threshold = threshold
        self._store = store if not callable(store) else None
        self._make_store = store if callable(store) else None

    @property
    def store(self) -> ArtifactStore:
        if self._store is None:
            assert self._make_store is not None
            self._store = self._make_store()
        return self._store

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [await self._offload(p) for p in payloads]

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [await self._fetch(p) for p in payloads]

    async def _offload(self, payload: Payload) -> Payload:
        size = payload.ByteSize()
        if size <= self.threshold:
            return payload
        ref = await _maybe_in_thread(size, self.store.put, payload.SerializeToString(), MEDIA_TYPE)
        return _reference(ref)

    async def _fetch(self, payload: Payload) -> Payload:
        ref = _ref_of(payload)
        if ref is None:
            return payload
        return _payload(ref, await _maybe_in_thread(ref.size, self._read, ref))

    def offload_now(self, payload: Payload) -> Payload:
        """`encode` for one payload, synchronously (the codec server's request threads)."""
        if payload.ByteSize() <= self.threshold:
            return payload
        return _reference(self.store.put(payload.SerializeToString(), MEDIA_TYPE))

    def fetch_now(self, payload: Payload) -> Payload:
        """`decode` for one payload, synchronously (the codec server's request threads)."""
        ref = _ref_of(payload)
        return payload if ref is None else _payload(ref, self._read(ref))

    def _read(self, ref: ArtifactRef) -> bytes:
        try:
            return self.store.get(ref)
        except (ArtifactMissing, ValueError) as exc:
            raise ClaimCheckError(
                f"claim-checked payload {ref.digest[:12]} ({ref.size} bytes) cannot be read: {exc} "
                f"(set RATCHET_ARTIFACT_DIR to the workers' shared artifact directory)"
            ) from None


def _payload(ref: ArtifactRef, data: bytes) -> Payload:
    try:
        return Payload.FromString(data)
    except DecodeError:
        raise ClaimCheckError(f"blob {ref.digest[:12]} is not a serialized payload") from None


def _reference(ref: ArtifactRef) -> Payload:
    return Payload(metadata={"encoding": ENCODING}, data=ref.model_dump_json().encode())


def _ref_of(payload: Payload) -> ArtifactRef | None:
    """The reference a claim-check payload holds; None for any other payload."""
    if payload.metadata.get("encoding") != ENCODING:
        return None
    try:
        return ArtifactRef.model_validate_json(payload.data)
    except ValidationError:
        raise ClaimCheckError(f"malformed claim-check reference: {payload.data[:200]!r}") from None


async def _maybe_in_thread(size: int, fn: Callable, *args: object):
    if size >= ASYNC_IO_BYTES:
        return await asyncio.to_thread(fn, *args)
    return fn(*args)
