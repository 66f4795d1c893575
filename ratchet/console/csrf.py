"""CSRF protection of the console's forms: a double-submit token bound to a cookie.

The first page a browser gets sets a random nonce as an HttpOnly, SameSite=Strict cookie; every
form carries HMAC(process secret, nonce) in a hidden field. A POST is taken only if the field
matches the cookie's nonce. Another site can neither read the field (same-origin policy) nor set
the cookie, and the secret lives only in this process: a restart makes old pages' forms stale
(they say so and the page reloads with a fresh token). HttpGuard's Origin rule comes first.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass, field

COOKIE = "ratchet_console_csrf"
FIELD = "csrf"


@dataclass(frozen=True)
class Csrf:
    secret: bytes = field(default_factory=lambda: secrets.token_bytes(32))
    """Per process: tokens do not outlive the console that issued them."""

    @staticmethod
    def new_nonce() -> str:
        return secrets.token_urlsafe(24)

    def token_for(self, nonce: str) -> str:
        return hmac.new(self.secret, nonce.encode(), hashlib.sha256).hexdigest()

    def valid(self, nonce: str | None, token: str | None) -> bool:
        """The form's token matches the cookie's nonce (both present)."""
        if not nonce or not token:
            return False
        return hmac.compare_digest(self.token_for(nonce).encode(), token.encode())
