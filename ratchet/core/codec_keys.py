"""The format of RATCHET_CODEC_KEYS, `id1:base64key,id2:base64key` (32-byte AES-256-GCM keys, the
first current): parsed here, beneath both the settings, which check it when a worker or the CLI
starts, and the codec (ratchet/payloads/codec.py), which encrypts with the keys. Standard library
only: reading the keys needs no cryptography."""

from __future__ import annotations

import base64
import binascii
import re

KEY_BYTES = 32
_KEY_ID_PATTERN = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


def parse_keys(spec: str) -> dict[str, bytes]:
    """`id1:base64key,id2:base64key` -> {id: key}, in order (the first is current).

    Messages name the key id, never the key material.
    """
    keys: dict[str, bytes] = {}
    for position, entry in enumerate((part.strip() for part in spec.split(",")), start=1):
        if not entry:
            continue
        key_id, sep, encoded = entry.partition(":")
        key_id = key_id.strip()
        if not sep or not _KEY_ID_PATTERN.match(key_id):
            raise ValueError(f"entry {position} must be ID:BASE64KEY with an id of letters, digits, '.', '_' or '-'")
        if key_id in keys:
            raise ValueError(f"key id {key_id!r} appears twice")
        keys[key_id] = _decode_key(key_id, encoded.strip())
    if not keys:
        raise ValueError("no keys given; expected ID:BASE64KEY[,ID:BASE64KEY...]")
    return keys


def _decode_key(key_id: str, encoded: str) -> bytes:
    try:
        key = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"key {key_id!r} is not valid base64") from None
    if len(key) != KEY_BYTES:
        raise ValueError(f"key {key_id!r} is {len(key)} bytes; AES-256-GCM needs {KEY_BYTES}")
    return key
