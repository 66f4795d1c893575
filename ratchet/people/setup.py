"""The `Authenticator` and OpenID client of `ratchet console` and `ratchet serve`, from settings."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from ratchet.ops.people_settings import PeopleSettings
from ratchet.people.authenticate import Authenticator
from ratchet.people.oidc import OidcClient
from ratchet.people.sessions import Signer
from ratchet.stores.users import open_users


def authenticator(
    people: PeopleSettings,
    token: str | None,
    ledger_url: str,
    loopback: bool,
    console_roles: Sequence[str] = ("approver",),
) -> Authenticator:
    """Tokens (the shared `token`, people's from the ledger's database), sessions signed with
    RATCHET_SESSION_SECRET (else a random key), RATCHET_TRUSTED_PROXIES; the single user when on
    `loopback` with none of a token, an OpenID provider or a proxy; the single user (or the shared
    token's holder) in `console_roles` (RATCHET_ROLES)."""
    secret = people.session_secret.get_secret_value() if people.session_secret else None
    signer = (
        Signer(key=hashlib.sha256(secret.encode()).digest(), ttl_s=people.session_hours * 3600)
        if secret
        else (Signer(ttl_s=people.session_hours * 3600))
    )
    return Authenticator(
        console_token=token,
        users=open_users(ledger_url),
        sessions=signer,
        proxies=tuple(people.proxy_networks),
        single_user=loopback and token is None and not people.oidc and not people.proxy_networks,
        console_roles=tuple(console_roles),
    )


def oidc_client(people: PeopleSettings) -> OidcClient | None:
    if people.oidc_issuer is None or people.oidc_client_id is None:
        return None
    secret = people.oidc_client_secret.get_secret_value() if people.oidc_client_secret else None
    return OidcClient(people.oidc_issuer, people.oidc_client_id, secret, people.oidc_scopes, people.oidc_leeway_s)
