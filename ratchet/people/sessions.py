"""Signed cookies: the console's session (who signed in, until when) and a sign-in in progress
(state, nonce, PKCE verifier, where to go back to). A value is base64url(JSON) `.` HMAC-SHA256 of
it under the console's key (RATCHET_SESSION_SECRET, else random per process); the cookie is
HttpOnly and SameSite=Lax (the provider's redirect back is a cross-site navigation, which a
Strict cookie would not follow). A changed value, another key or a passed expiry reads as nothing."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from ratchet.contracts.identity import Principal

SESSION_COOKIE = "ratchet_session"
FLOW_COOKIE = "ratchet_signin"
FLOW_TTL_S = 600.0
"""A sign-in must come back from the provider within ten minutes."""


@dataclass(frozen=True)
class Signer:
    key: bytes = field(default_factory=lambda: secrets.token_bytes(32))
    ttl_s: float = 12 * 3600.0
    clock: Callable[[], float] = time.time

    def seal(self, value: dict[str, Any], ttl_s: float | None = None) -> str:
        body = dict(value, exp=self.clock() + (ttl_s if ttl_s is not None else self.ttl_s))
        data = base64.urlsafe_b64encode(json.dumps(body, separators=(",", ":")).encode()).decode()
        return f"{data}.{self._mac(data)}"

    def open(self, sealed: str | None) -> dict[str, Any] | None:
        if not sealed or "." not in sealed:
            return None
        data, _, mac = sealed.rpartition(".")
        if not hmac.compare_digest(mac.encode(), self._mac(data).encode()):
            return None
        try:
            value = json.loads(base64.urlsafe_b64decode(data))
        except ValueError:
            return None
        if not isinstance(value, dict) or not isinstance(value.get("exp"), (int, float)) or value["exp"] < self.clock():
            return None
        return value

    def session(self, principal: Principal) -> str:
        return self.seal({"principal": principal.model_dump()})

    def principal(self, sealed: str | None) -> Principal | None:
        value = self.open(sealed)
        try:
            return Principal.model_validate(value["principal"]) if value and "principal" in value else None
        except ValidationError:
            return None

    def _mac(self, data: str) -> str:
        return hmac.new(self.key, data.encode(), hashlib.sha256).hexdigest()
