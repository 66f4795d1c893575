"""A model provider's own settings: each provider reads its endpoint, key and headers from its own
environment variables (OPENAI_*, ANTHROPIC_*), as that vendor's client does, and from the worker's
RATCHET_ENV_FILE. Secret fields are `SecretStr`: every variable that holds one is in the worker's
one secret list (ratchet/ops/secrets.py), so they are redacted and kept from the programs the agent
runs; `ratchet config` shows them masked (`masked`)."""

from __future__ import annotations

import os
from typing import Annotated, TypeVar

from pydantic import AliasChoices, Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from ratchet.core.settings_errors import SettingsError, mask_url


def env(name: str) -> AliasChoices:
    return AliasChoices(name)


Headers = Annotated[dict[str, SecretStr], NoDecode]
"""`Name: value` lines in a variable (as curl's -H), not JSON."""


class ProviderSettings(BaseSettings):
    model_config = SettingsConfigDict(
        env_file=os.environ.get("RATCHET_ENV_FILE"),
        extra="ignore",
        populate_by_name=True,
        env_ignore_empty=True,
    )

    headers: Headers = Field(default_factory=dict)
    """Extra HTTP headers of every request (`Name: value` lines in the provider's *_CUSTOM_HEADERS
    variable); their values are secrets (an `Authorization` of a gateway)."""

    @field_validator("headers", mode="before")
    @classmethod
    def _header_lines(cls, value: object) -> object:
        if isinstance(value, str):
            lines = [line.partition(":") for line in value.split("\n") if line.strip()]
            if any(not sep or not name.strip() for name, sep, _ in lines):
                raise ValueError("must be lines of `Name: value`")
            return {name.strip(): rest.strip() for name, _, rest in lines}
        return value

    @property
    def configured(self) -> bool:
        """Whether the provider has what it needs to call its endpoint (a key, or a base URL of its own)."""
        return False

    def header_values(self) -> dict[str, str]:
        return {name: value.get_secret_value() for name, value in self.headers.items()}

    def masked(self) -> dict[str, object]:
        """For display (`ratchet config`): secrets as `****`, header values masked, URLs' passwords masked."""
        shown: dict[str, object] = {}
        for name, value in self:
            if isinstance(value, SecretStr):
                value = "****" if value.get_secret_value() else ""
            elif name == "headers":
                value = {header: "****" for header in value}
            elif isinstance(value, str) and "://" in value:
                value = mask_url(value)
            shown[name] = value
        return shown


Loaded = TypeVar("Loaded", bound=ProviderSettings)


def load(cls: type[Loaded]) -> Loaded:
    """`cls` read from the environment; a bad value raises SettingsError naming its variable."""
    try:
        return cls()
    except ValidationError as exc:
        found = []
        for err in exc.errors():
            field = str(err["loc"][0]) if err["loc"] else "?"
            alias = cls.model_fields[field].validation_alias if field in cls.model_fields else None
            found.append(f"{alias.choices[0] if isinstance(alias, AliasChoices) else field}: {err['msg']}")
        raise SettingsError("invalid settings: " + "; ".join(found)) from None
