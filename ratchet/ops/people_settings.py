"""How the console and `ratchet serve` know people (docs/SECURITY.md, "Sign-in"): an OpenID Connect
provider, the reverse proxies whose identity headers are believed, the session cookie's key. Read
from the environment (and RATCHET_ENV_FILE) on their own, so a bad value is an error at start
naming the variable; every one is optional (unset: the single-user console token on loopback)."""

from __future__ import annotations

import ipaddress
import os
from urllib.parse import urlsplit

from pydantic import AliasChoices, Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from ratchet.core.settings_errors import SettingsError
from ratchet.ops.http_guard import is_loopback

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class PeopleSettings(BaseSettings):
    model_config = SettingsConfigDict(
        env_file=os.environ.get("RATCHET_ENV_FILE"), extra="ignore", populate_by_name=True, env_ignore_empty=True
    )

    oidc_issuer: str | None = Field(
        None,
        validation_alias=AliasChoices("RATCHET_OIDC_ISSUER"),
        description="The OpenID provider's issuer URL (its discovery document is ISSUER/.well-known/"
        "openid-configuration). Set: the console signs people in through it (authorization code with PKCE).",
    )
    oidc_client_id: str | None = Field(
        None, min_length=1, max_length=500, validation_alias=AliasChoices("RATCHET_OIDC_CLIENT_ID")
    )
    oidc_client_secret: SecretStr | None = Field(
        None,
        validation_alias=AliasChoices("RATCHET_OIDC_CLIENT_SECRET"),
        description="The console's client secret at the provider; unset: a public client (PKCE only).",
    )
    oidc_scopes: str = Field(
        "openid profile email",
        validation_alias=AliasChoices("RATCHET_OIDC_SCOPES"),
        description="The scopes the console asks for, space-separated (must include openid).",
    )
    oidc_roles_claim: str = Field(
        "groups",
        min_length=1,
        validation_alias=AliasChoices("RATCHET_OIDC_ROLES_CLAIM"),
        description="The ID token's claim that lists a person's roles (a list of strings, or one string).",
    )
    oidc_leeway_s: float = Field(60.0, ge=0, le=600, validation_alias=AliasChoices("RATCHET_OIDC_LEEWAY_S"))
    public_url: str | None = Field(
        None,
        validation_alias=AliasChoices("RATCHET_CONSOLE_URL"),
        description="The console's URL as browsers reach it (behind a TLS proxy: https://...); the OIDC "
        "redirect URI is it plus /auth/callback. Unset: http:// and the request's Host.",
    )
    trusted_proxies: str = Field(
        "",
        validation_alias=AliasChoices("RATCHET_TRUSTED_PROXIES"),
        description="Addresses (CIDR, comma-separated, e.g. 127.0.0.1/32) of the reverse proxies whose "
        "X-Forwarded-User / -Email / -Groups headers name the person (oauth2-proxy's); from elsewhere "
        "they are ignored.",
    )
    session_secret: SecretStr | None = Field(
        None,
        min_length=32,
        validation_alias=AliasChoices("RATCHET_SESSION_SECRET"),
        description="The key that signs the console's session cookies (at least 32 characters), shared by "
        "every console replica; unset: a random key per process (a restart signs everyone out).",
    )
    session_hours: float = Field(12.0, gt=0, le=24 * 30, validation_alias=AliasChoices("RATCHET_SESSION_HOURS"))

    @field_validator("oidc_issuer", "public_url")
    @classmethod
    def _web_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{value!r} is not an http(s):// URL")
        if parts.scheme == "http" and not is_loopback(parts.hostname):
            raise ValueError(f"{value!r}: http:// only on loopback; use https://")
        if parts.query or parts.fragment:
            raise ValueError(f"{value!r}: no query or fragment")
        return value.rstrip("/")

    @field_validator("oidc_scopes")
    @classmethod
    def _scopes(cls, value: str) -> str:
        if "openid" not in value.split():
            raise ValueError(f"{value!r} must include openid")
        return " ".join(value.split())

    @field_validator("trusted_proxies")
    @classmethod
    def _networks(cls, value: str) -> str:
        networks(value)
        return value

    @model_validator(mode="after")
    def _oidc_pair(self) -> PeopleSettings:
        if (self.oidc_issuer is None) != (self.oidc_client_id is None):
            missing = "RATCHET_OIDC_CLIENT_ID" if self.oidc_client_id is None else "RATCHET_OIDC_ISSUER"
            raise ValueError(
                f"{missing}: required with {'RATCHET_OIDC_ISSUER' if self.oidc_issuer else 'RATCHET_OIDC_CLIENT_ID'}"
            )
        return self

    @property
    def oidc(self) -> bool:
        return self.oidc_issuer is not None

    @property
    def proxy_networks(self) -> list[Network]:
        return networks(self.trusted_proxies)


def networks(text: str) -> list[Network]:
    """`10.0.0.0/8, ::1` as networks; ValueError naming the part that is not one."""
    found = []
    for part in (p.strip() for p in text.split(",")):
        if part:
            try:
                found.append(ipaddress.ip_network(part, strict=True))
            except ValueError as exc:
                raise ValueError(f"{part!r} is not an address or network (CIDR, e.g. 127.0.0.1/32): {exc}") from None
    return found


def load_people_settings() -> PeopleSettings:
    """The sign-in settings; a bad one raises SettingsError naming the environment variable."""
    try:
        return PeopleSettings()
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            field = str(err["loc"][0]) if err["loc"] else ""
            alias = (
                PeopleSettings.model_fields[field].validation_alias if field in PeopleSettings.model_fields else None
            )
            name = f"{alias.choices[0]}: " if isinstance(alias, AliasChoices) else f"{field}: " if field else ""
            problems.append(name + str(err["msg"]).removeprefix("Value error, "))
        raise SettingsError("invalid sign-in settings: " + "; ".join(problems)) from None
