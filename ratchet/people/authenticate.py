"""Who a request to the console or `ratchet serve` comes from: a `Principal`, or None (401).

In this order, the first that applies decides:

1. `Authorization: Bearer <token>` (or the console's sign-in cookie holding a token): the
   console's single token (RATCHET_CONSOLE_TOKEN / RATCHET_SERVE_TOKEN, compared in constant time)
   is the single user, `via="console-token"`; a person's API token (ratchet/stores/users.py) is
   that person with their roles, `via="token"`. Any other token is refused, not passed over to
   rules 2 and 4 (a trusted proxy's headers still count: oauth2-proxy may pass its own
   `Authorization` on).
2. The console's session cookie (after OpenID Connect sign-in, ratchet/people/oidc.py): the
   person it was signed for, with the roles of the ID token's roles claim, `via="oidc"`.
3. `X-Forwarded-User` (else `X-Forwarded-Email`) with `X-Forwarded-Groups` as roles (oauth2-proxy's
   headers), `via="proxy"`, only when the connection comes from an address of
   RATCHET_TRUSTED_PROXIES: from anywhere else the headers are ignored.
4. Nobody, unless the server is the single-user default: on loopback with no token and no other
   sign-in configured, every request is the single user (as before there were people).
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ratchet.contracts.identity import Principal
from ratchet.ops.http_guard import Headers
from ratchet.ops.people_settings import Network
from ratchet.people.sessions import SESSION_COOKIE, Signer
from ratchet.stores.users import UserStore

CONSOLE_SUBJECT = "console"
CONSOLE_ISSUER = "ratchet-console"
TOKEN_ISSUER = "ratchet-users"
PROXY_ISSUER = "ratchet-proxy"
PROXY_USER, PROXY_EMAIL, PROXY_GROUPS = "X-Forwarded-User", "X-Forwarded-Email", "X-Forwarded-Groups"
TOKEN_COOKIE = "ratchet_console_token"


@dataclass(frozen=True)
class Authenticator:
    console_token: str | None = None
    """The single shared token; its holder is the single user."""
    users: UserStore | None = None
    """People's API tokens; None: only the console token is a token."""
    sessions: Signer = field(default_factory=Signer)
    proxies: Sequence[Network] = ()
    """Addresses whose identity headers are believed (RATCHET_TRUSTED_PROXIES)."""
    single_user: bool = False
    """Nobody signs in: every request is the single user (loopback, nothing else configured)."""
    console_roles: tuple[str, ...] = ("approver",)

    @property
    def console_principal(self) -> Principal:
        return Principal(
            subject=CONSOLE_SUBJECT, issuer=CONSOLE_ISSUER, roles=list(self.console_roles), via="console-token"
        )

    async def identify(self, headers: Headers, cookies: Mapping[str, str], client: str | None) -> Principal | None:
        """The person this request comes from; None when it proves nobody (or a wrong token)."""
        authorization = headers.get("Authorization")
        if authorization is not None or TOKEN_COOKIE in cookies:
            scheme, _, given = (authorization or f"Bearer {cookies[TOKEN_COOKIE]}").partition(" ")
            token = await self.by_token(given.strip()) if scheme.lower() == "bearer" else None
            return token or self.by_proxy(headers, client)  # a proxy may pass its own Authorization on
        signed_in = self.sessions.principal(cookies.get(SESSION_COOKIE))
        if signed_in is not None:
            return signed_in
        proxied = self.by_proxy(headers, client)
        if proxied is not None:
            return proxied
        return self.console_principal if self.single_user else None

    async def by_token(self, given: str) -> Principal | None:
        if not given:
            return None
        if self.console_token is not None and hmac.compare_digest(given.encode(), self.console_token.encode()):
            return self.console_principal
        if self.users is None:
            return None
        user = await asyncio.to_thread(self.users.find, given)
        if user is None:
            return None
        return Principal(subject=user.name, issuer=TOKEN_ISSUER, roles=list(user.roles), via="token")

    def by_proxy(self, headers: Headers, client: str | None) -> Principal | None:
        name = headers.get(PROXY_USER) or headers.get(PROXY_EMAIL)
        if not name or not self.trusts(client):
            return None
        groups = [g.strip() for g in (headers.get(PROXY_GROUPS) or "").split(",") if g.strip()]
        return Principal(subject=name.strip(), issuer=PROXY_ISSUER, roles=groups, via="proxy")

    def trusts(self, client: str | None) -> bool:
        try:
            address = ipaddress.ip_address((client or "").strip("[]"))
        except ValueError:
            return False
        return any(address in network for network in self.proxies)


def roles_of(claims: Mapping[str, Any], claim: str) -> list[str]:
    """A person's roles from the ID token's `claim`: a list of strings, or one string (space- or
    comma-separated); anything else is no roles."""
    value = claims.get(claim)
    if isinstance(value, str):
        return [r for r in value.replace(",", " ").split() if r]
    if isinstance(value, list):
        return [r for r in value if isinstance(r, str) and r]
    return []
