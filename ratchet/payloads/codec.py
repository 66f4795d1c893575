"""AES-GCM payload encryption with key ids, so keys can rotate without breaking old histories.

Every payload a worker or client sends to Temporal is serialized, encrypted with the *current*
key under a fresh 12-byte nonce, and wrapped in a payload whose metadata says
`encoding: binary/encrypted` and `encryption-key-id: <id>`. Decoding uses whichever key the
payload names, so a payload written under an old key still decodes after a new current key is
added. Payloads without the encrypted encoding pass through untouched (histories written before
encryption was switched on stay readable), with a WARNING naming the run: such a payload sits in
Temporal's history in cleartext, typically a start or signal from the plain `temporal` CLI without
`--codec-endpoint` (docs/OPERATIONS.md).

Keys come from RATCHET_CODEC_KEYS: `id1:base64key,id2:base64key`, 32-byte keys, first is current.
Without keys, `KeylessCodec` stands in: it encrypts nothing, and an encrypted payload fails with a
`CodecKeyError` saying that RATCHET_CODEC_KEYS is not set (the `ratchet` CLI prints that line).
"""

from __future__ import annotations

import copy
import hashlib
import logging
import os
from collections.abc import Mapping, Sequence

from temporalio.api.common.v1 import Payload
from temporalio.converter import PayloadCodec, SerializationContext, WithSerializationContext

from ratchet.core.codec_keys import parse_keys

ENCODING = b"binary/encrypted"
KEY_ID = "encryption-key-id"
NONCE_BYTES = 12
WARNED_MAX = 4096
"""Cleartext payloads remembered so a replay of the same history does not warn again."""
log = logging.getLogger("ratchet.payloads.codec")


class CodecKeyError(ValueError):
    """A payload cannot be decrypted: its key is not configured, or the key does not fit."""


class EncryptionCodec(PayloadCodec, WithSerializationContext):
    """Encrypts with the current key; decrypts with the key each payload names."""

    def __init__(self, keys: Mapping[str, bytes], current: str | None = None) -> None:
        if not keys:
            raise ValueError("EncryptionCodec needs at least one key")
        self.current = current or next(iter(keys))
        if self.current not in keys:
            raise ValueError(f"current key id {self.current!r} is not among the keys")
        from cryptography.exceptions import InvalidTag  # here: a worker without keys does not hold its 6 MiB
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        self._ciphers = {key_id: AESGCM(key) for key_id, key in keys.items()}
        self._invalid_tag = InvalidTag
        self.workflow_id: str | None = None
        """The run whose payloads this copy codes (`with_context`), for the cleartext warning."""
        self._warned: set[bytes] = set()  # shared by the copies

    def with_context(self, context: SerializationContext) -> EncryptionCodec:
        """A copy that knows the run it decodes for (the SDK calls this per workflow activation)."""
        workflow_id = getattr(context, "workflow_id", None)
        if workflow_id == self.workflow_id:
            return self
        named = copy.copy(self)
        named.workflow_id = workflow_id
        return named

    @classmethod
    def from_spec(cls, spec: str) -> EncryptionCodec:
        return cls(parse_keys(spec))

    @property
    def key_ids(self) -> list[str]:
        return list(self._ciphers)

    def encrypt(self, payload: Payload) -> Payload:
        nonce = os.urandom(NONCE_BYTES)
        sealed = self._ciphers[self.current].encrypt(nonce, payload.SerializeToString(), None)
        return Payload(
            metadata={"encoding": ENCODING, KEY_ID: self.current.encode()},
            data=nonce + sealed,
        )

    def decrypt(self, payload: Payload) -> Payload:
        if payload.metadata.get("encoding") != ENCODING:
            self._warn_cleartext(payload)
            return payload
        key_id = payload.metadata.get(KEY_ID, b"").decode(errors="replace")
        cipher = self._ciphers.get(key_id)
        if cipher is None:
            raise CodecKeyError(
                f"payload was encrypted with key id {key_id!r}, which is not in RATCHET_CODEC_KEYS "
                f"(configured: {', '.join(self._ciphers)}); add that key to decrypt it"
            )
        data = payload.data
        try:
            plain = cipher.decrypt(data[:NONCE_BYTES], data[NONCE_BYTES:], None)
        except self._invalid_tag:
            raise CodecKeyError(
                f"payload with key id {key_id!r} does not decrypt: wrong key for that id, or corrupted data"
            ) from None
        return Payload.FromString(plain)

    def _warn_cleartext(self, payload: Payload) -> None:
        """Once per payload (WARNED_MAX remembered): keys are set, yet this one was stored in clear."""
        digest = hashlib.sha256(payload.SerializeToString(deterministic=True)).digest()
        if digest in self._warned:
            return
        if len(self._warned) >= WARNED_MAX:
            self._warned.clear()
        self._warned.add(digest)
        encoding = payload.metadata.get("encoding", b"none").decode(errors="replace")
        log.warning(
            "run %s: a payload (encoding %s) arrived in cleartext although RATCHET_CODEC_KEYS is set, so "
            "Temporal stores it unencrypted; start and signal runs with `ratchet` or the temporal CLI's "
            "--codec-endpoint (docs/OPERATIONS.md)",
            self.workflow_id or "?",
            encoding,
        )

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self.encrypt(p) for p in payloads]

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self.decrypt(p) for p in payloads]


class KeylessCodec(PayloadCodec):
    """The codec without RATCHET_CODEC_KEYS: encrypts nothing; an encrypted payload fails saying so,
    instead of the payload converter's `KeyError: Unknown payload encoding binary/encrypted`."""

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return list(payloads)

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        for payload in payloads:
            if payload.metadata.get("encoding") == ENCODING:
                key_id = payload.metadata.get(KEY_ID, b"").decode(errors="replace")
                raise CodecKeyError(
                    f"payloads are encrypted (key id {key_id!r}) and RATCHET_CODEC_KEYS is not set here: "
                    "set it to the workers' keys to read them"
                )
        return list(payloads)
