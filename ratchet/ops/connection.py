"""The client connection of the worker and the CLI: Temporal's environment configuration.

`TemporalSettings` is the part of `Settings` (ratchet/ops/settings.py) Temporal's CLI and SDKs
own: the TEMPORAL_* variables, a TOML config file and its profiles (`temporalio.envconfig`), read
as they read them. `temporal_connection()` turns them into a `TemporalConnection`: what
`temporalio.client.Client.connect` takes, and what `ratchet config` shows, masked.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import AliasChoices, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings

from ratchet.core.settings_errors import SettingsError

if TYPE_CHECKING:
    from temporalio.client import Client


class TemporalSettings(BaseSettings):
    """The TEMPORAL_* part of the settings; `Settings` holds it, with the environment's config."""

    temporal_address: str = Field("localhost:7233", validation_alias=AliasChoices("TEMPORAL_ADDRESS"))
    temporal_namespace: str = Field("default", validation_alias=AliasChoices("TEMPORAL_NAMESPACE"))
    temporal_api_key: SecretStr | None = Field(None, validation_alias=AliasChoices("TEMPORAL_API_KEY"))
    temporal_tls_cert: Path | None = Field(None, validation_alias=AliasChoices("TEMPORAL_TLS_CLIENT_CERT_PATH"))
    temporal_tls_key: Path | None = Field(None, validation_alias=AliasChoices("TEMPORAL_TLS_CLIENT_KEY_PATH"))
    temporal_config_file: Path | None = Field(
        None,
        validation_alias=AliasChoices("TEMPORAL_CONFIG_FILE"),
        description="Temporal's client config file (TOML with [profile.NAME] tables); unset: Temporal's "
        "default location (~/.config/temporalio/temporal.toml), if it exists. TEMPORAL_* variables override it.",
    )
    temporal_profile: str | None = Field(
        None, validation_alias=AliasChoices("TEMPORAL_PROFILE"), description="Profile of that file; unset: `default`."
    )

    @field_validator("temporal_address")
    @classmethod
    def _host_port(cls, value: str) -> str:
        if not _is_host_port(value):
            raise ValueError("must be HOST:PORT, e.g. localhost:7233")
        return value

    def temporal_connection(self) -> TemporalConnection:
        """The client connection: Temporal's environment configuration (`temporalio.envconfig`: the
        profile TEMPORAL_PROFILE of the TOML file TEMPORAL_CONFIG_FILE, overridden by the TEMPORAL_*
        variables), with these settings' own temporal_* values (from a RATCHET_ENV_FILE, or given
        in code) applied as those variables. TLS files are read here: an unreadable one raises
        SettingsError naming its variable (or the file and profile that named it)."""
        from temporalio.envconfig import ClientConfigProfile

        env = {name: value for name, value in os.environ.items() if value}  # empty counts as unset, as above
        for name, variable in TEMPORAL_VARIABLES.items():
            if name in self.model_fields_set:
                value = getattr(self, name)
                if value is None:
                    env.pop(variable, None)
                else:
                    env[variable] = value.get_secret_value() if isinstance(value, SecretStr) else str(value)
        config_file, profile_name = env.get("TEMPORAL_CONFIG_FILE"), env.get("TEMPORAL_PROFILE", "default")
        if config_file is not None:
            try:
                Path(config_file).read_bytes()
            except OSError as exc:
                raise SettingsError(f"TEMPORAL_CONFIG_FILE: cannot read {config_file}: {exc.strerror}") from None
        try:
            profile = ClientConfigProfile.load(override_env_vars=env)
        except Exception as exc:  # the bridge's ConfigError: TOML syntax, an unknown profile
            where = (
                "TEMPORAL_PROFILE" if "TEMPORAL_PROFILE" in env and "not found" in str(exc) else "TEMPORAL_CONFIG_FILE"
            )
            raise SettingsError(f"{where}: {exc} (config file: {config_file or 'the default location'})") from None
        try:
            kwargs: dict[str, Any] = dict(profile.to_client_connect_config())
        except OSError as exc:
            source = _tls_source(profile, exc.filename, env, config_file, profile_name)
            raise SettingsError(f"{source}: cannot read {exc.filename}: {exc.strerror}") from None
        address = kwargs.pop("target_host", None) or DEFAULT_TEMPORAL_ADDRESS
        if not _is_host_port(address):
            raise SettingsError(
                f"address of profile {profile_name!r} in {config_file or 'the Temporal config file'}: "
                f"must be HOST:PORT, e.g. localhost:7233 (got {address!r})"
            )
        tls_files = {}
        if profile.tls is not None:
            for attr, variable in TLS_FILE_VARIABLES.items():
                source = getattr(profile.tls, attr)
                if source is not None:
                    tls_files[variable] = str(source) if isinstance(source, Path) else "(inline)"
        api_key = kwargs.get("api_key")
        return TemporalConnection(
            address=address,
            namespace=kwargs.get("namespace") or "default",
            api_key=SecretStr(api_key) if api_key else None,
            tls=kwargs.get("tls"),
            rpc_metadata=dict(kwargs.get("rpc_metadata") or {}),
            profile=profile_name,
            config_file=config_file,
            tls_files=tls_files,
        )


DEFAULT_TEMPORAL_ADDRESS = "localhost:7233"
UNREACHABLE_HINT = "start it with 'temporal server start-dev' or set TEMPORAL_ADDRESS"


class TemporalUnreachable(Exception):
    """No connection to the Temporal service at `address` (refused, unknown host, ...): one line
    naming the address, why, and what to start. The CLI and the worker exit with EXIT_UNREACHABLE."""

    def __init__(self, address: str, reason: str) -> None:
        super().__init__(f"cannot reach Temporal at {address} ({reason}): {UNREACHABLE_HINT}")
        self.address, self.reason = address, reason


EXIT_UNREACHABLE = 69
"""The exit status of a `ratchet` verb or worker that cannot reach Temporal (sysexits' EX_UNAVAILABLE)."""


async def open_client(connection: TemporalConnection, **options: Any) -> Client:
    """`temporalio.client.Client.connect` to `connection` (with `options`: plugins, data converter,
    ...); a connection that cannot be made raises TemporalUnreachable instead of the bridge's
    RuntimeError (`Failed client connect: ... tonic::transport::Error(...)`)."""
    from temporalio.client import Client

    try:
        return await Client.connect(**connection.connect_kwargs(), **options)
    except RuntimeError as exc:
        if "Failed client connect" not in str(exc):
            raise
        raise TemporalUnreachable(connection.address, _connect_reason(str(exc))) from None


def _connect_reason(error: str) -> str:
    """A few words for the bridge's connect error: the tonic text is for Rust programmers."""
    if "ConnectionRefused" in error or "Connection refused" in error:
        return "connection refused"
    if "dns error" in error:
        return "unknown host"
    if "timed out" in error.lower() or "TimedOut" in error:
        return "timed out"
    if "tls" in error.lower() or "certificate" in error.lower():
        return "TLS handshake failed: check TEMPORAL_TLS_* and TEMPORAL_API_KEY"
    detail = error.split("Failed client connect:", 1)[-1].strip()
    return detail if len(detail) <= 160 else detail[:159] + "…"


TEMPORAL_VARIABLES = {
    "temporal_address": "TEMPORAL_ADDRESS",
    "temporal_namespace": "TEMPORAL_NAMESPACE",
    "temporal_api_key": "TEMPORAL_API_KEY",
    "temporal_tls_cert": "TEMPORAL_TLS_CLIENT_CERT_PATH",
    "temporal_tls_key": "TEMPORAL_TLS_CLIENT_KEY_PATH",
    "temporal_config_file": "TEMPORAL_CONFIG_FILE",
    "temporal_profile": "TEMPORAL_PROFILE",
}
"""Settings field -> the variable temporalio.envconfig reads. Ratchet always used Temporal's own
names, so the mapping is one to one; envconfig also reads the ones Ratchet has no field for
(TEMPORAL_TLS, TEMPORAL_TLS_SERVER_CA_CERT_PATH, TEMPORAL_TLS_SERVER_NAME, TEMPORAL_GRPC_META_*, ...)."""

TLS_FILE_VARIABLES = {
    "client_cert": "TEMPORAL_TLS_CLIENT_CERT_PATH",
    "client_private_key": "TEMPORAL_TLS_CLIENT_KEY_PATH",
    "server_root_ca_cert": "TEMPORAL_TLS_SERVER_CA_CERT_PATH",
}
_TLS_FILE_KEYS = {
    "client_cert": "client_cert_path",
    "client_private_key": "client_key_path",
    "server_root_ca_cert": "server_ca_cert_path",
}


def _is_host_port(value: str) -> bool:
    host, sep, port = value.rpartition(":")
    return bool(sep and host and port.isdigit())


def _tls_source(
    profile: Any, filename: str | None, env: Mapping[str, str], config_file: str | None, profile_name: str
) -> str:
    """Where the TLS file that could not be read was named: its variable, or the config file's key."""
    for attr, variable in TLS_FILE_VARIABLES.items():
        source = getattr(profile.tls, attr, None) if profile.tls is not None else None
        if isinstance(source, Path) and str(source) == filename:
            if env.get(variable) == filename:
                return variable
            return (
                f"tls.{_TLS_FILE_KEYS[attr]} of profile {profile_name!r} in {config_file or 'the Temporal config file'}"
            )
    return "TLS"


@dataclass(frozen=True)
class TemporalConnection:
    """Where and how a client connects (`Settings.temporal_connection`)."""

    address: str
    namespace: str
    api_key: SecretStr | None
    tls: Any
    """None (on when there is an API key), False, True, or a `temporalio.service.TLSConfig` (files read)."""
    rpc_metadata: Mapping[str, str] = field(default_factory=dict)
    profile: str = "default"
    config_file: str | None = None
    tls_files: Mapping[str, str] = field(default_factory=dict)
    """TLS file variable -> the path it names, for display."""

    def connect_kwargs(self) -> dict[str, Any]:
        """Arguments for `temporalio.client.Client.connect`."""
        kwargs: dict[str, Any] = {"target_host": self.address, "namespace": self.namespace}
        if self.api_key is not None:
            kwargs["api_key"] = self.api_key.get_secret_value()
        if self.tls is not None:
            kwargs["tls"] = self.tls
        if self.rpc_metadata:
            kwargs["rpc_metadata"] = dict(self.rpc_metadata)
        return kwargs

    @property
    def tls_on(self) -> bool:
        return bool(self.tls) if self.tls is not None else self.api_key is not None

    def masked(self) -> dict[str, object]:
        """The connection for display (`ratchet config`): the API key and gRPC header values masked."""
        return {
            "temporal_address": self.address,
            "temporal_namespace": self.namespace,
            "temporal_api_key": "****" if self.api_key is not None else "",
            "temporal_tls": self.tls_on,
            "temporal_tls_cert": self.tls_files.get("TEMPORAL_TLS_CLIENT_CERT_PATH"),
            "temporal_tls_key": self.tls_files.get("TEMPORAL_TLS_CLIENT_KEY_PATH"),
            "temporal_tls_server_ca_cert": self.tls_files.get("TEMPORAL_TLS_SERVER_CA_CERT_PATH"),
            "temporal_grpc_meta": {name: "****" for name in self.rpc_metadata},
            "temporal_config_file": self.config_file,
            "temporal_profile": self.profile,
        }
