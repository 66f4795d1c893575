"""The data converter every Ratchet client and worker uses.

pydantic JSON for values, without fields that hold their default (`RatchetPayloadConverter`: every
default a contract leaves out is filled back in on decode, so history carries only what differs;
changing a contract's default therefore changes what recorded payloads mean). Then two optional codecs, in this order on the way out:

1. encryption (RATCHET_CODEC_KEYS, ratchet/payloads/codec.py): payloads are encrypted, and failures carry
   their message and stack trace inside an encrypted payload (`encode_common_attributes`), so
   error text that quotes a prompt or a file never reaches the server in clear;
2. claim check (RATCHET_CLAIM_CHECK_BYTES, on by default, ratchet/payloads/claim_check.py): payloads still
   over the threshold go to the artifact store and history keeps a reference.

Encrypting first means the artifact store only ever holds what history would have held:
ciphertext when keys are set. Decoding runs the chain backwards. Workers and clients of one
namespace must use the same keys and reach the same artifact store.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from typing import Any

from temporalio.api.common.v1 import Payload
from temporalio.contrib.pydantic import PydanticJSONPlainPayloadConverter
from temporalio.converter import (
    CompositePayloadConverter, DataConverter, DefaultFailureConverterWithEncodedAttributes, DefaultPayloadConverter,
    JSONPlainPayloadConverter, PayloadCodec,
)

from ratchet.payloads.claim_check import ClaimCheckCodec
from ratchet.payloads.codec import EncryptionCodec
from ratchet.ops.settings import Settings
from ratchet.stores.artifacts import ArtifactStore


class CompactJSONPayloadConverter(PydanticJSONPlainPayloadConverter):
    """pydantic JSON without default-valued fields (`"content_ref": null`, `"tool_calls": []`, ...).
    Decoding is pydantic's own: an absent field takes its default."""

    def to_payload(self, value: Any) -> Payload | None:
        data = self._schema_serializer.to_json(value, exclude_defaults=True)
        return Payload(metadata={"encoding": b"json/plain"}, data=data)


_JSON = CompactJSONPayloadConverter()
_ENCODINGS = tuple(
    _JSON if isinstance(c, JSONPlainPayloadConverter) else c for c in DefaultPayloadConverter.default_encoding_payload_converters
)


class RatchetPayloadConverter(CompositePayloadConverter):
    """The SDK builds a payload converter for every workflow activation (per serialization
    context); every instance shares one JSON converter, so its cache of pydantic TypeAdapters
    lives as long as the process instead of one activation."""

    def __init__(self) -> None:
        super().__init__(*_ENCODINGS)


BASE_CONVERTER = DataConverter(payload_converter_class=RatchetPayloadConverter)


class CodecChain(PayloadCodec):
    """Several codecs as one: encode in the given order, decode in reverse."""

    def __init__(self, codecs: Sequence[PayloadCodec]) -> None:
        self.codecs = list(codecs)

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        out = list(payloads)
        for codec in self.codecs:
            out = await codec.encode(out)
        return out

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        out = list(payloads)
        for codec in reversed(self.codecs):
            out = await codec.decode(out)
        return out


def payload_codec(settings: Settings) -> EncryptionCodec | None:
    """The codec for RATCHET_CODEC_KEYS, or None when encryption is off."""
    if settings.codec_keys is None:
        return None
    return EncryptionCodec.from_spec(settings.codec_keys.get_secret_value())


def claim_check_codec(settings: Settings, artifacts: ArtifactStore | None = None) -> ClaimCheckCodec | None:
    """The claim check for RATCHET_CLAIM_CHECK_BYTES over `artifacts` (default: a directory store at
    RATCHET_ARTIFACT_DIR, opened on first use), or None when off."""
    if settings.claim_check_bytes == 0:
        return None
    if artifacts is not None:
        return ClaimCheckCodec(artifacts, settings.claim_check_bytes)
    from ratchet.stores.artifacts import DirectoryArtifactStore

    artifact_dir = settings.artifact_dir
    return ClaimCheckCodec(lambda: DirectoryArtifactStore(artifact_dir), settings.claim_check_bytes)


def data_converter(settings: Settings, artifacts: ArtifactStore | None = None) -> DataConverter:
    """The converter for `settings`' codecs; the claim check offloads to `artifacts` when given
    (a worker's store, `RatchetOptions.from_settings`), else to RATCHET_ARTIFACT_DIR."""
    encryption = payload_codec(settings)
    codecs = [c for c in (encryption, claim_check_codec(settings, artifacts)) if c is not None]
    if not codecs:
        return BASE_CONVERTER
    converter = dataclasses.replace(
        BASE_CONVERTER, payload_codec=codecs[0] if len(codecs) == 1 else CodecChain(codecs)
    )
    if encryption is not None:
        converter = dataclasses.replace(
            converter, failure_converter_class=DefaultFailureConverterWithEncodedAttributes
        )
    return converter
