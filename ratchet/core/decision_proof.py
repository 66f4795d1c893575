"""Ed25519 over a decision's claim: reading keys (a signing key's file, the public keys the workers
trust), signing a claim and checking a proof. Pure (no I/O, no clock: the time is passed
in), so the workflow's update validators check proofs with `problem`; the signing key's file is
read by the settings (ratchet/ops/decision_settings.py).

Keys: a signing key is a file holding a PEM private key (`openssl genpkey -algorithm ed25519`), or
its 32 raw bytes, or those bytes in base64; a public key is its 32 raw bytes in base64, named by a
key id (`RATCHET_APPROVER_KEYS="ops-1:BASE64,console:BASE64"`)."""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from ratchet.contracts.decisions import DecisionClaim, DecisionProof, canonical_bytes

if TYPE_CHECKING:  # `cryptography` is imported when a key is read or a proof checked: 6 MiB a worker
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey  # without keys does not hold

KEY_ID_PATTERN = r"^[A-Za-z0-9_.@-]{1,100}$"


class KeyProblem(ValueError):
    """A key that does not load; the message says why (the settings name the setting)."""


@dataclass(frozen=True)
class Signer:
    """A signing key and the id the workers know its public half by."""

    key_id: str
    key: Ed25519PrivateKey

    @property
    def public(self) -> str:
        """The public half, base64 (what RATCHET_APPROVER_KEYS lists for `key_id`)."""
        from cryptography.hazmat.primitives import serialization

        raw = self.key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        return base64.b64encode(raw).decode()

    def sign(self, claim: DecisionClaim) -> DecisionProof:
        signature = base64.b64encode(self.key.sign(canonical_bytes(claim))).decode()
        return DecisionProof(claim=claim, key_id=self.key_id, signature=signature)


def private_key(data: bytes) -> Ed25519PrivateKey:
    """A signing key from a file's bytes: PEM, 32 raw bytes, or 32 bytes in base64."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    if b"-----BEGIN" in data:
        try:
            key = serialization.load_pem_private_key(data, password=None)
        except (ValueError, TypeError) as exc:
            raise KeyProblem(f"not a readable unencrypted PEM private key ({exc})") from None
        if not isinstance(key, Ed25519PrivateKey):
            raise KeyProblem(f"a PEM {type(key).__name__}, not an Ed25519 private key")
        return key
    raw = data if len(data) == 32 else _base64(data.strip(), "the key file")
    if len(raw) != 32:
        raise KeyProblem(f"an Ed25519 private key is 32 bytes (raw or base64), not {len(raw)}")
    return Ed25519PrivateKey.from_private_bytes(raw)


def public_keys(text: str) -> dict[str, str]:
    """`id:base64,id:base64` as {id: base64}, each checked to be a 32-byte Ed25519 public key."""
    keys: dict[str, str] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        key_id, sep, value = item.partition(":")
        if not sep or not key_id or not value:
            raise KeyProblem(f"{item[:40]!r} is not ID:BASE64PUBLICKEY")
        if key_id in keys:
            raise KeyProblem(f"key id {key_id!r} appears twice")
        raw = _base64(value.encode(), f"key {key_id!r}")
        if len(raw) != 32:
            raise KeyProblem(f"key {key_id!r}: an Ed25519 public key is 32 bytes, not {len(raw)}")
        keys[key_id] = value
    return keys


def problem(proof: DecisionProof, keys: dict[str, str], now: datetime, leeway_s: float) -> str | None:
    """Why `proof` does not hold at `now` (an unknown key, a bad signature, not yet valid, expired),
    or None."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    public = keys.get(proof.key_id)
    if public is None:
        known = ", ".join(sorted(keys)) or "none"
        return f"signed with key {proof.key_id!r}, which the workers do not know (RATCHET_APPROVER_KEYS: {known})"
    try:
        signature = base64.b64decode(proof.signature, validate=True)
        Ed25519PublicKey.from_public_bytes(base64.b64decode(public)).verify(signature, canonical_bytes(proof.claim))
    except (InvalidSignature, binascii.Error, ValueError):
        return f"the signature does not match the claim under key {proof.key_id!r} (forged or altered)"
    return _window(proof.claim, now, timedelta(seconds=leeway_s))


def _window(claim: DecisionClaim, now: datetime, leeway: timedelta) -> str | None:
    try:
        issued, expires = _time(claim.issued_at), _time(claim.expires_at)
    except ValueError as exc:
        return f"the claim's times: {exc}"
    if issued - leeway > now:
        return f"issued at {claim.issued_at}, after now ({now.isoformat()}) by more than the allowed skew of {leeway}"
    if expires + leeway < now:
        return f"expired at {claim.expires_at} (now {now.isoformat()}, allowed skew {leeway})"
    return None


def _time(text: str) -> datetime:
    value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if value.tzinfo is None:
        raise ValueError(f"{text!r} has no time zone")
    return value


def _base64(data: bytes, what: str) -> bytes:
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise KeyProblem(f"{what} is not base64") from None
