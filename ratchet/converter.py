"""The data converter every Ratchet client and worker uses.

pydantic JSON for values. With RATCHET_CODEC_KEYS set, payloads are also encrypted
(ratchet/codec.py) and failures carry their message and stack trace inside an encrypted payload
(`encode_common_attributes`), so error text that quotes a prompt or a file never reaches the
server in clear. Workers and clients of one namespace must use the same keys.
"""

from __future__ import annotations

import dataclasses

from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import DataConverter, DefaultFailureConverterWithEncodedAttributes

from ratchet.codec import EncryptionCodec
from ratchet.settings import Settings


def payload_codec(settings: Settings) -> EncryptionCodec | None:
    """The codec for RATCHET_CODEC_KEYS, or None when encryption is off."""
    if settings.codec_keys is None:
        return None
    return EncryptionCodec.from_spec(settings.codec_keys.get_secret_value())


def data_converter(settings: Settings) -> DataConverter:
    codec = payload_codec(settings)
    if codec is None:
        return pydantic_data_converter
    return dataclasses.replace(
        pydantic_data_converter,
        payload_codec=codec,
        failure_converter_class=DefaultFailureConverterWithEncodedAttributes,
    )
