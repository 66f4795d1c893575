"""Who a person is, as an authenticated surface knows them: the console and `ratchet serve` (OpenID
Connect, a trusted proxy's header, a per-person API token, or the single-user console token)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class Principal(BaseModel):
    """An authenticated person: `subject` as `issuer` names them, `roles` from Ratchet's users table
    or the identity provider's claims, and how they proved it (`via`)."""

    subject: str
    issuer: str
    roles: list[str] = Field(default_factory=list)
    via: Literal["oidc", "proxy", "token", "console-token"]
