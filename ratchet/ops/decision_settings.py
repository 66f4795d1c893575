"""The settings of signed decisions (docs/SECURITY.md): the key this process signs with, the public
keys the workers trust, the allowed clock skew and a proof's lifetime, and who decides from the CLI
and the console's single-user token. Part of `Settings`; a key that does not load is an error at
start naming the setting."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

from pydantic import AliasChoices, Field, field_validator
from pydantic_settings import BaseSettings, NoDecode

from ratchet.contracts.identity import Principal
from ratchet.core.decision_proof import KEY_ID_PATTERN, KeyProblem, Signer, private_key, public_keys

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey


class DecisionSettings(BaseSettings):
    signing_key: Path | None = Field(
        None,
        validation_alias=AliasChoices("RATCHET_SIGNING_KEY"),
        description="A file holding this process's Ed25519 signing key (PEM, or 32 bytes raw or in base64): "
        "the console and the CLI sign every approve, reject and decide with it. Unset: decisions go unsigned.",
    )
    signing_key_id: str = Field(
        "console",
        pattern=KEY_ID_PATTERN,
        validation_alias=AliasChoices("RATCHET_SIGNING_KEY_ID"),
        description="The id the workers know RATCHET_SIGNING_KEY's public half by (in RATCHET_APPROVER_KEYS).",
    )
    approver_keys: str | None = Field(
        None,
        validation_alias=AliasChoices("RATCHET_APPROVER_KEYS"),
        description="The public keys decisions may be signed with, ID:BASE64[,ID:BASE64...] (32-byte Ed25519 "
        "public keys); a worker plans each run with them, `ratchet audit --verify` checks with them.",
    )
    decision_leeway_s: float = Field(
        60.0,
        ge=0,
        le=3600,
        validation_alias=AliasChoices("RATCHET_DECISION_LEEWAY_S"),
        description="The clock skew allowed around a decision proof's issue time and expiry.",
    )
    decision_ttl_s: float = Field(
        300.0,
        gt=0,
        le=24 * 3600,
        validation_alias=AliasChoices("RATCHET_DECISION_TTL_S"),
        description="How long a decision this process signs stays valid.",
    )
    subject: str | None = Field(
        None,
        min_length=1,
        max_length=200,
        validation_alias=AliasChoices("RATCHET_SUBJECT"),
        description="Who the CLI's decisions are signed as (default: the Temporal client's identity).",
    )
    roles: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: ["approver"],
        validation_alias=AliasChoices("RATCHET_ROLES"),
        description="The roles of the CLI's person and of the console's single-user token, comma-separated.",
    )

    @field_validator("roles", mode="before")
    @classmethod
    def _roles(cls, value: object) -> object:
        return [r.strip() for r in value.split(",") if r.strip()] if isinstance(value, str) else value

    @field_validator("approver_keys")
    @classmethod
    def _approver_keys(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                public_keys(value)
            except KeyProblem as exc:
                raise ValueError(str(exc)) from None
        return value

    @field_validator("signing_key")
    @classmethod
    def _signing_key_loads(cls, value: Path | None) -> Path | None:
        if value is not None:
            _read_key(value)
        return value

    def signer(self) -> Signer | None:
        """The signing key (read from its file), or None when RATCHET_SIGNING_KEY is unset."""
        return Signer(key_id=self.signing_key_id, key=_read_key(self.signing_key)) if self.signing_key else None

    @property
    def trusted_keys(self) -> dict[str, str]:
        """RATCHET_APPROVER_KEYS as {key id: base64 public key}."""
        return public_keys(self.approver_keys) if self.approver_keys else {}

    def cli_principal(self, identity: str) -> Principal:
        return Principal(subject=self.subject or identity, issuer="ratchet-cli", roles=self.roles, via="token")


def _read_key(path: Path) -> Ed25519PrivateKey:
    try:
        return private_key(path.read_bytes())
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror or exc}") from None
    except KeyProblem as exc:
        raise ValueError(f"{path}: {exc}") from None
