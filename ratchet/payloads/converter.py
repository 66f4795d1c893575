"""The data converter every Ratchet client and worker uses.

pydantic JSON for values, without fields that hold their default (`RatchetPayloadConverter`: every
default a contract leaves out is filled back in on decode, so history carries only what differs;
changing a contract's default therefore changes what recorded payloads mean). Then, in this order on
the way out (the SDK's order: payload codec, then external storage):

1. encryption (RATCHET_CODEC_KEYS, ratchet/payloads/codec.py), the payload codec: payloads are
   encrypted, and failures carry their message and stack trace inside an encrypted payload
   (`encode_common_attributes`), so error text that quotes a prompt or a file never reaches the
   server in clear;
2. offload (RATCHET_CLAIM_CHECK_BYTES, on by default), the SDK's `ExternalStorage` with
   `ArtifactStorageDriver` (ratchet/payloads/offload.py): payloads still over the threshold go to
   the artifact store and history keeps a reference.

Encrypting first means the artifact store only ever holds what history would have held:
ciphertext when keys are set. Decoding runs the other way. Workers and clients of one namespace
must use the same keys and reach the same artifact store.

`encode_payloads` / `decode_payloads` apply exactly this wire transformation to bare payloads
(the codec server, the replay gate's decode check).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from typing import Any

from pydantic_core import SchemaSerializer
from pydantic_core.core_schema import any_schema
from temporalio.api.common.v1 import Payload
from temporalio.common import RawValue
from temporalio.contrib.pydantic import PydanticJSONPlainPayloadConverter
from temporalio.converter import (
    CompositePayloadConverter,
    DataConverter,
    DefaultFailureConverterWithEncodedAttributes,
    DefaultPayloadConverter,
    ExternalStorage,
    JSONPlainPayloadConverter,
)

from ratchet.payloads.codec import EncryptionCodec, KeylessCodec
from ratchet.payloads.offload import ArtifactStorageDriver
from ratchet.ops.settings import Settings
from ratchet.stores.artifacts import ArtifactStore


class CompactJSONPayloadConverter(PydanticJSONPlainPayloadConverter):
    """pydantic JSON without default-valued fields (`"content_ref": null`, `"tool_calls": []`, ...).
    Decoding is pydantic's own: an absent field takes its default. The serializer is the one the
    SDK's converter builds for its `ToJsonOptions` (which offer `exclude_unset` only)."""

    _serializer = SchemaSerializer(any_schema())

    def to_payload(self, value: Any) -> Payload | None:
        data = self._serializer.to_json(value, exclude_defaults=True)
        return Payload(metadata={"encoding": b"json/plain"}, data=data)


_JSON = CompactJSONPayloadConverter()
_ENCODINGS = tuple(
    _JSON if isinstance(c, JSONPlainPayloadConverter) else c
    for c in DefaultPayloadConverter.default_encoding_payload_converters
)


class RatchetPayloadConverter(CompositePayloadConverter):
    """The SDK builds a payload converter for every workflow activation (per serialization
    context); every instance shares one JSON converter, so its cache of pydantic TypeAdapters
    lives as long as the process instead of one activation."""

    def __init__(self) -> None:
        super().__init__(*_ENCODINGS)


BASE_CONVERTER = DataConverter(payload_converter_class=RatchetPayloadConverter)


def payload_codec(settings: Settings) -> EncryptionCodec | None:
    """The codec for RATCHET_CODEC_KEYS, or None when encryption is off."""
    if settings.codec_keys is None:
        return None
    return EncryptionCodec.from_spec(settings.codec_keys.get_secret_value())


def external_storage(settings: Settings, artifacts: ArtifactStore | None = None) -> ExternalStorage:
    """The SDK's external storage over `artifacts` (default: the store of RATCHET_ARTIFACT_URL,
    opened on first use, so a CLI or codec server that never meets an offloaded payload never opens
    it): payloads over RATCHET_CLAIM_CHECK_BYTES are offloaded. With 0 nothing is offloaded, but
    references already in history still resolve, so turning offload off never strands a running
    workflow."""
    if artifacts is None:
        from ratchet.stores.urls import open_artifacts

        url = settings.artifact_store_url
        driver = ArtifactStorageDriver(lambda: open_artifacts(url))
    else:
        driver = ArtifactStorageDriver(artifacts)
    if settings.claim_check_bytes == 0:
        return ExternalStorage(drivers=[driver], driver_selector=lambda context, payload: None)
    # The SDK offloads payloads of at least the threshold; the setting names the largest one kept.
    return ExternalStorage(drivers=[driver], payload_size_threshold=settings.claim_check_bytes + 1)


def data_converter(settings: Settings, artifacts: ArtifactStore | None = None) -> DataConverter:
    """The converter for `settings`: encryption (RATCHET_CODEC_KEYS) and offload to `artifacts`
    (a worker's store, `RatchetOptions.from_settings`), else to RATCHET_ARTIFACT_DIR."""
    converter = dataclasses.replace(BASE_CONVERTER, external_storage=external_storage(settings, artifacts))
    encryption = payload_codec(settings)
    if encryption is None:  # says "RATCHET_CODEC_KEYS is not set" on an encrypted payload
        return dataclasses.replace(converter, payload_codec=KeylessCodec())
    return dataclasses.replace(
        converter, payload_codec=encryption, failure_converter_class=DefaultFailureConverterWithEncodedAttributes
    )


async def encode_payloads(converter: DataConverter, payloads: Sequence[Payload]) -> list[Payload]:
    """Payloads as `converter` puts them on the wire (encrypted, then offloaded if large), values
    untouched: the SDK's `encode` of each as a `RawValue`, which its payload converter passes as is."""
    return await converter.encode([RawValue(p) for p in payloads])


async def decode_payloads(converter: DataConverter, payloads: Sequence[Payload]) -> list[Payload]:
    """The reverse of `encode_payloads`: references resolved from the artifact store, then decrypted."""
    values = await converter.decode(payloads, [RawValue] * len(payloads))
    return [value.payload for value in values]
