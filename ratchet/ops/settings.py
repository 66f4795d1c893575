"""Worker and CLI settings, read from the environment (and an optional .env-style file).

Names follow the tools users already know: TEMPORAL_ADDRESS / TEMPORAL_NAMESPACE as Temporal's
CLI, OPENAI_API_KEY / OPENAI_BASE_URL as the openai client; the rest are RATCHET_*.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class SettingsError(Exception):
    """Settings that cannot work; the message names the setting."""


def _env(*names: str) -> AliasChoices:
    return AliasChoices(*names)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_file=os.environ.get("RATCHET_ENV_FILE"),
        extra="ignore",
        populate_by_name=True,
        env_ignore_empty=True,
    )

    temporal_address: str = Field("localhost:7233", validation_alias=_env("TEMPORAL_ADDRESS"))
    temporal_namespace: str = Field("default", validation_alias=_env("TEMPORAL_NAMESPACE"))
    temporal_api_key: SecretStr | None = Field(None, validation_alias=_env("TEMPORAL_API_KEY"))
    temporal_tls_cert: Path | None = Field(None, validation_alias=_env("TEMPORAL_TLS_CLIENT_CERT_PATH"))
    temporal_tls_key: Path | None = Field(None, validation_alias=_env("TEMPORAL_TLS_CLIENT_KEY_PATH"))
    task_queue: str = Field("ratchet", min_length=1, validation_alias=_env("RATCHET_TASK_QUEUE"))
    max_concurrent_activities: int = Field(
        100, ge=1, le=10_000, validation_alias=_env("RATCHET_MAX_CONCURRENT_ACTIVITIES")
    )
    max_cached_workflows: int = Field(
        1000, ge=0, le=100_000, validation_alias=_env("RATCHET_MAX_CACHED_WORKFLOWS")
    )
    max_concurrent_workflow_tasks: int = Field(
        100, ge=2, le=10_000, validation_alias=_env("RATCHET_MAX_CONCURRENT_WORKFLOW_TASKS")
    )
    shutdown_grace_s: float = Field(
        30.0,
        ge=0,
        le=24 * 3600,
        validation_alias=_env("RATCHET_SHUTDOWN_GRACE_S"),
        description="On SIGTERM, how long running activities may take to finish before they are cancelled.",
    )

    # --- operations: payload size, metrics, logs, tracing (docs/OPERATIONS.md) ---
    claim_check_bytes: int = Field(
        256 * 1024,
        ge=0,
        le=2 * 1024 * 1024,
        validation_alias=_env("RATCHET_CLAIM_CHECK_BYTES"),
        description="Payloads larger than this go to the artifact store and history keeps a reference; "
        "0 turns the claim check off. At most 2 MiB, Temporal's own payload limit.",
    )
    metrics_port: int | None = Field(
        None, ge=1, le=65_535, validation_alias=_env("RATCHET_METRICS_PORT"),
        description="Serve Prometheus metrics on http://HOST:PORT/metrics (worker only); unset: off.",
    )
    metrics_host: str = Field("0.0.0.0", min_length=1, validation_alias=_env("RATCHET_METRICS_HOST"))
    log_format: Literal["text", "json"] = Field("text", validation_alias=_env("RATCHET_LOG_FORMAT"))
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(
        "INFO", validation_alias=_env("RATCHET_LOG_LEVEL")
    )
    otel: bool = Field(
        False,
        validation_alias=_env("RATCHET_OTEL"),
        description="OpenTelemetry tracing of workflows and activities (needs the [otel] extra); "
        "OTEL_EXPORTER_OTLP_ENDPOINT and OTEL_SERVICE_NAME as the OpenTelemetry SDK reads them.",
    )

    @field_validator("log_format", mode="before")
    @classmethod
    def _lower(cls, value: object) -> object:
        return value.lower() if isinstance(value, str) else value

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper(cls, value: object) -> object:
        return value.upper() if isinstance(value, str) else value

    local_tools: bool = Field(
        True,
        validation_alias=_env("RATCHET_LOCAL_TOOLS"),
        description="Fast read-only tools (timeout at most 30 s, no heartbeat) run as local activities: "
        "no server round trip per call. Read-only only: a local activity may run again after a worker crash. "
        "Off on a worker with RATCHET_MAX_CACHED_WORKFLOWS=0 (its evictions cancel local activities).",
    )
    plugins: str = Field(
        "",
        validation_alias=_env("RATCHET_PLUGINS"),
        description="Comma-separated modules imported at worker start; they register tools and profiles.",
    )

    openai_api_key: SecretStr | None = Field(None, validation_alias=_env("OPENAI_API_KEY"))
    openai_base_url: str | None = Field(None, validation_alias=_env("OPENAI_BASE_URL"))
    model: str = Field("gpt-4o-mini", min_length=1, validation_alias=_env("RATCHET_MODEL"))

    workspace_root: Path = Field(
        Path(".ratchet/workspaces"), validation_alias=_env("RATCHET_WORKSPACE_ROOT")
    )
    artifact_dir: Path = Field(Path(".ratchet/artifacts"), validation_alias=_env("RATCHET_ARTIFACT_DIR"))
    ledger_path: Path = Field(
        Path(".ratchet/ledger.sqlite3"), validation_alias=_env("RATCHET_LEDGER_PATH")
    )

    codec_keys: SecretStr | None = Field(
        None,
        validation_alias=_env("RATCHET_CODEC_KEYS"),
        description="Payload encryption keys, ID:BASE64KEY[,ID:BASE64KEY...] (32-byte keys); "
        "the first encrypts, all decrypt. Unset: payloads are not encrypted.",
    )

    @field_validator("codec_keys")
    @classmethod
    def _codec_keys(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None:
            from ratchet.payloads.codec import parse_keys  # cryptography only when keys are set

            parse_keys(value.get_secret_value())
        return value

    search_attributes: bool = Field(
        True,
        validation_alias=_env("RATCHET_SEARCH_ATTRIBUTES"),
        description="Upsert RatchetAgent/RatchetPhase/RatchetAwaitingApproval; they must be registered on the namespace.",
    )
    tracker_path: Path = Field(
        Path(".ratchet/tracker.sqlite3"), validation_alias=_env("RATCHET_TRACKER_PATH")
    )

    @field_validator("temporal_address")
    @classmethod
    def _host_port(cls, value: str) -> str:
        host, sep, port = value.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ValueError("must be HOST:PORT, e.g. localhost:7233")
        return value

    @property
    def plugin_modules(self) -> list[str]:
        return [name.strip() for name in self.plugins.split(",") if name.strip()]

    @property
    def model_endpoint_configured(self) -> bool:
        return self.openai_api_key is not None or self.openai_base_url is not None

    def masked(self) -> dict[str, object]:
        """Effective settings for display, secrets masked."""
        shown: dict[str, object] = {}
        for name, value in self.model_dump().items():
            if isinstance(value, SecretStr):
                value = "****" if value.get_secret_value() else ""
            shown[name] = str(value) if isinstance(value, Path) else value
        return shown


def load_settings() -> Settings:
    """Read settings; a bad one raises SettingsError naming the environment variable."""
    try:
        return Settings()
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            field = str(err["loc"][0]) if err["loc"] else "?"
            alias = Settings.model_fields[field].validation_alias if field in Settings.model_fields else None
            env_name = alias.choices[0] if isinstance(alias, AliasChoices) else field
            problems.append(f"{env_name}: {err['msg']}")
        raise SettingsError("invalid settings: " + "; ".join(problems)) from None


WORKER_PROCESS_FIELDS = (
    "temporal_address", "task_queue", "workspace_root", "artifact_dir", "ledger_path", "tracker_path",
    "max_cached_workflows", "plugins",
)


def worker_environment(settings: Settings, **extra: str) -> dict[str, str]:
    """The environment of a `python -m ratchet.worker` process serving `settings`' server, queue, paths,
    cache size and plugins. Inherited TEMPORAL_*, RATCHET_* and OPENAI_* variables are left out, so
    the process sees only what is given here (and in `extra`)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RATCHET_", "TEMPORAL_", "OPENAI_"))}
    for name in WORKER_PROCESS_FIELDS:
        alias = Settings.model_fields[name].validation_alias
        assert isinstance(alias, AliasChoices)
        env[str(alias.choices[0])] = str(getattr(settings, name))
    env.update(extra)
    return env
