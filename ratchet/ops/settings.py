"""Worker and CLI settings, read from the environment (and an optional .env-style file).

Names follow the tools users already know: TEMPORAL_* as Temporal's CLI and SDKs (the client
connection, `TemporalSettings` in ratchet/ops/connection.py: Temporal's environment
configuration); the rest are RATCHET_*: the worker's task queue, host, slots and tools, its
default model provider and the providers' queues, operations (payload size, metrics, logs,
tracing), the stores and payload encryption. A tool's own configuration is the tool's (e.g. the
example tracker's, activities/tracker_tools.py), and a model provider's endpoint and key are the
provider's (OPENAI_*, ANTHROPIC_*: ratchet/models/settings.py), not fields here.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Literal
from urllib.parse import quote

from pydantic import AliasChoices, BaseModel, Field, SecretStr, ValidationError, field_validator
from pydantic_settings import SettingsConfigDict

from ratchet.core.codec_keys import parse_keys
from ratchet.core.settings_errors import SettingsError, mask_url  # noqa: F401  (settings' own errors; re-exported)
from ratchet.ops.connection import TemporalSettings
from ratchet.ops.decision_settings import DecisionSettings
from ratchet.ops.tenant_settings import TenantSettings

DEV_SERVER_UI = "http://localhost:8233"
"""The Web UI of `temporal server start-dev` (its default --ui-port)."""


def _env(*names: str) -> AliasChoices:
    return AliasChoices(*names)


class ModelQueue(BaseModel):
    """A provider's own task queue (`RATCHET_MODEL_QUEUES`)."""

    per_second: float | None = Field(None, gt=0)
    """Temporal's rate limit of the queue's activities, shared by every worker polling it."""
    concurrency: int | None = Field(None, ge=1, le=10_000)
    """Model calls of this provider one worker runs at once (default: RATCHET_MAX_CONCURRENT_ACTIVITIES)."""


class Settings(TemporalSettings, TenantSettings, DecisionSettings):
    model_config = SettingsConfigDict(
        env_file=os.environ.get("RATCHET_ENV_FILE"),
        extra="ignore",
        populate_by_name=True,
        env_ignore_empty=True,
    )

    task_queue: str = Field("ratchet", min_length=1, validation_alias=_env("RATCHET_TASK_QUEUE"))
    host_id: str = Field(
        default_factory=lambda: default_host_id(),
        pattern=r"^[A-Za-z0-9_.-]{1,200}$",
        validation_alias=_env("RATCHET_HOST_ID"),
        description="This host's name, unique per host (default: the hostname, sanitised). The worker also "
        "serves the host task queue RATCHET_TASK_QUEUE@RATCHET_HOST_ID: workspace activities of the runs "
        "whose workspace is on this host.",
    )
    max_concurrent_activities: int = Field(
        100, ge=1, le=10_000, validation_alias=_env("RATCHET_MAX_CONCURRENT_ACTIVITIES")
    )
    max_cached_workflows: int = Field(1000, ge=0, le=100_000, validation_alias=_env("RATCHET_MAX_CACHED_WORKFLOWS"))
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
        None,
        ge=1,
        le=65_535,
        validation_alias=_env("RATCHET_METRICS_PORT"),
        description="Serve Prometheus metrics on http://HOST:PORT/metrics (worker only); unset: off.",
    )
    metrics_host: str = Field("0.0.0.0", min_length=1, validation_alias=_env("RATCHET_METRICS_HOST"))
    log_format: Literal["text", "json"] = Field("text", validation_alias=_env("RATCHET_LOG_FORMAT"))
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field("INFO", validation_alias=_env("RATCHET_LOG_LEVEL"))
    otel: bool = Field(
        False,
        validation_alias=_env("RATCHET_OTEL"),
        description="OpenTelemetry tracing of workflows and activities (needs the [otel] extra); "
        "OTEL_EXPORTER_OTLP_ENDPOINT and OTEL_SERVICE_NAME as the OpenTelemetry SDK reads them.",
    )

    @field_validator("log_format", "sandbox", "promote", mode="before")
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
    sandbox: Literal["nsjail", "off"] = Field(
        "nsjail",
        validation_alias=_env("RATCHET_SANDBOX"),
        description="Where programs the agent runs (run_command, verifiers, tools declared runs_code) run: "
        "`nsjail`, fresh Linux namespaces, no root needed (ratchet/sandbox/); `off`, unconfined as the worker's "
        "user (logged as a WARNING at start). If nsjail cannot run here, the worker does not offer those tools "
        "and verifiers fail (docs/SECURITY.md).",
    )
    plugins: str = Field(
        "",
        validation_alias=_env("RATCHET_PLUGINS"),
        description="Comma-separated modules imported at worker start; they register tools and profiles.",
    )
    mcp_servers: Path | None = Field(
        None,
        validation_alias=_env("RATCHET_MCP_SERVERS"),
        description="A JSON (or .toml) file of the MCP servers this worker may start or connect to "
        "(ratchet/mcp/config.py); `${NAME}` in their env or headers reads the worker's variable NAME, a secret.",
    )

    prices_file: Path | None = Field(
        None,
        validation_alias=_env("RATCHET_PRICES_FILE"),
        description="A JSON file of model prices (USD per million tokens, dated) over ratchet/core/prices.py's.",
    )

    provider: str = Field(
        "openai",
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$",
        validation_alias=_env("RATCHET_PROVIDER"),
        description="The model provider of a run whose profile and input name none; its model is the "
        "provider's default (OPENAI_MODEL, ANTHROPIC_MODEL) unless the profile or run names one.",
    )
    model_queues: dict[str, ModelQueue] = Field(
        default_factory=dict,
        validation_alias=_env("RATCHET_MODEL_QUEUES"),
        description='Providers whose model calls run on a task queue of their own, `{"openai": {"per_second": 5, '
        '"concurrency": 8}}`: Temporal limits that queue to `per_second` activities across every worker '
        "(max_task_queue_activities_per_second), each worker runs at most `concurrency` at once. Every worker "
        'of the task queue must say the same (docs/OPERATIONS.md, "Provider rate limits").',
    )
    model_timeout_s: float = Field(
        120.0,
        gt=0,
        le=3600,
        validation_alias=_env("RATCHET_MODEL_TIMEOUT_S"),
        description="One model call's timeout; a profile's `model_timeout_s` or a run's `model.timeout_s`"
        " overrides it.",
    )
    model_max_attempts: int = Field(
        8,
        ge=1,
        le=100,
        validation_alias=_env("RATCHET_MODEL_MAX_ATTEMPTS"),
        description="Attempts of a model call on retryable failures (429, 5xx, timeouts), 1 s apart doubling up to"
        " 60 s; a profile's `model_max_attempts` overrides it.",
    )

    workspace_root: Path = Field(Path(".ratchet/workspaces"), validation_alias=_env("RATCHET_WORKSPACE_ROOT"))
    artifact_dir: Path = Field(Path(".ratchet/artifacts"), validation_alias=_env("RATCHET_ARTIFACT_DIR"))
    ledger_path: Path = Field(Path(".ratchet/ledger.sqlite3"), validation_alias=_env("RATCHET_LEDGER_PATH"))
    artifact_url: str | None = Field(
        None,
        validation_alias=_env("RATCHET_ARTIFACT_URL"),
        description="Where the artifact store is (ratchet/stores/urls.py): file:///ABS/DIR or file:REL/DIR (a "
        "directory), s3://BUCKET[/PREFIX], gs://BUCKET[/PREFIX] or az://CONTAINER[/PREFIX] (the `s3`, `gcs` or "
        "`azure` extra). Unset: the directory RATCHET_ARTIFACT_DIR.",
    )
    ledger_url: SecretStr | None = Field(
        None,
        validation_alias=_env("RATCHET_LEDGER_URL"),
        description="Where the idempotency ledger is (ratchet/stores/urls.py): sqlite:///REL/PATH or "
        "sqlite:////ABS/PATH (one host), postgresql://USER:PASSWORD@HOST:PORT/DB (many hosts; the `postgres` "
        "extra). Unset: sqlite:///RATCHET_LEDGER_PATH. A secret: `ratchet config` masks its password.",
    )

    codec_keys: SecretStr | None = Field(
        None,
        validation_alias=_env("RATCHET_CODEC_KEYS"),
        description="Payload encryption keys, ID:BASE64KEY[,ID:BASE64KEY...] (32-byte keys); "
        "the first encrypts, all decrypt. Unset: payloads are not encrypted.",
    )

    serve_token: SecretStr | None = Field(
        None,
        validation_alias=_env("RATCHET_SERVE_TOKEN"),
        description="The bearer token `ratchet serve` requires of every request (`Authorization: Bearer ...`). "
        "Required when it binds beyond loopback.",
    )
    hooks: Path | None = Field(
        None,
        validation_alias=_env("RATCHET_HOOKS"),
        description="A JSON (or .toml) file of the webhooks `ratchet serve` takes at POST /hooks/NAME "
        "(ratchet/serve/hooks.py): each signed with an HMAC secret (`${VAR}`), mapped to a run, a session's "
        "message or a decision.",
    )
    console_token: SecretStr | None = Field(
        None,
        validation_alias=_env("RATCHET_CONSOLE_TOKEN"),
        description="The token `ratchet console` asks for (a sign-in page sets it as a cookie; programs send "
        "`Authorization: Bearer ...`). Unset: RATCHET_SERVE_TOKEN. One of them is required beyond loopback.",
    )
    codec_token: SecretStr | None = Field(
        None,
        validation_alias=_env("RATCHET_CODEC_TOKEN"),
        description="The bearer token `ratchet codec-server` requires of every request (`Authorization: Bearer ...`; "
        "the Web UI with codec.passAccessToken, `temporal --codec-auth`). Required when it binds beyond loopback.",
    )

    temporal_ui_url: str | None = Field(
        None,
        validation_alias=_env("RATCHET_TEMPORAL_UI_URL"),
        description="The Temporal Web UI's page of the namespace, where `ratchet console` links each run "
        "(`<it>/workflows/<id>`): e.g. http://localhost:8080/namespaces/default (docker compose's UI), "
        "https://cloud.temporal.io/namespaces/NAMESPACE.ACCOUNT (Temporal Cloud). Unset: the dev server's UI, "
        "http://localhost:8233/namespaces/<the client's namespace>.",
    )

    @field_validator("temporal_ui_url")
    @classmethod
    def _web_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// URL, e.g. http://localhost:8080/namespaces/default")
        return value.rstrip("/") if value is not None else None

    def temporal_ui(self, namespace: str | None = None) -> str:
        """The Web UI's page of the namespace (no trailing slash): RATCHET_TEMPORAL_UI_URL, else the
        dev server's UI (DEV_SERVER_UI) for `namespace` (default: TEMPORAL_NAMESPACE)."""
        if self.temporal_ui_url is not None:
            return self.temporal_ui_url
        return f"{DEV_SERVER_UI}/namespaces/{quote(namespace or self.temporal_namespace, safe='')}"

    @field_validator("codec_keys")
    @classmethod
    def _codec_keys(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None:
            parse_keys(value.get_secret_value())
        return value

    search_attributes: bool = Field(
        True,
        validation_alias=_env("RATCHET_SEARCH_ATTRIBUTES"),
        description="Upsert RatchetAgent/RatchetPhase/RatchetAwaitingApproval (and RatchetSession/RatchetTurn,"
        " RatchetSteps/RatchetCostUsd); they must be registered on the namespace.",
    )

    # --- deploys: worker versioning (docs/OPERATIONS.md, "Deploying a new version") ---
    versioning: bool = Field(
        True,
        validation_alias=_env("RATCHET_VERSIONING"),
        description="Run the worker as a build of a Temporal Worker Deployment: one-shot runs finish on the "
        "build they started on, sessions move to a new build at a turn boundary. Off: every worker takes "
        "every run (every deploy moves every open run, which must then replay on the new code).",
    )
    deployment: str | None = Field(
        None,
        pattern=r"^[A-Za-z0-9_-]{1,100}$",
        validation_alias=_env("RATCHET_DEPLOYMENT"),
        description="The Worker Deployment this worker's build belongs to (default: named after the task queue, "
        "`ratchet`: the workers of another task queue, with their own profiles and tools, are another deployment).",
    )
    build_id: str | None = Field(
        None,
        pattern=r"^[A-Za-z0-9_.+-]{1,100}$",
        validation_alias=_env("RATCHET_BUILD_ID"),
        description="This worker's build (default: the package version and a digest of Ratchet's code, the "
        "agent profiles and the tool and MCP definitions: a changed prompt or tool is a new build).",
    )
    promote: Literal["first", "always", "never"] = Field(
        "first",
        validation_alias=_env("RATCHET_PROMOTE"),
        description="At start, make this build current: `first` only when the deployment has no current "
        "build yet, `always` (development: `make up`), `never` (`ratchet deploy` does it).",
    )

    @property
    def deployment_name(self) -> str:
        """RATCHET_DEPLOYMENT, else the task queue's name (each character a deployment name cannot
        hold as `-`): one fleet of workers serving one task queue is one deployment."""
        return self.deployment or re.sub(r"[^A-Za-z0-9_-]", "-", self.task_queue)[:100]

    def model_task_queue(self, provider: str) -> str | None:
        """The task queue of `provider`'s model calls, if it has its own (`{task_queue}/model/{provider}`)."""
        return model_queue(self.task_queue, provider) if provider in self.model_queues else None

    @property
    def host_task_queue(self) -> str:
        """The queue of this host's workspace activities: `{task_queue}@{host_id}`."""
        return f"{self.task_queue}@{self.host_id}"

    @property
    def ledger_store_url(self) -> str:
        """RATCHET_LEDGER_URL, else `sqlite:///` + RATCHET_LEDGER_PATH (percent-encoded; a relative
        path stays relative, an absolute one gives four slashes)."""
        if self.ledger_url is not None:
            return self.ledger_url.get_secret_value()
        return "sqlite:///" + quote(str(self.ledger_path), safe="/")

    @property
    def artifact_store_url(self) -> str:
        """RATCHET_ARTIFACT_URL, else RATCHET_ARTIFACT_DIR as a file URL: `file:///abs/dir` for an
        absolute directory, `file:rel/dir` for a relative one (percent-encoded)."""
        if self.artifact_url is not None:
            return self.artifact_url
        directory = str(self.artifact_dir)
        return ("file://" if directory.startswith("/") else "file:") + quote(directory, safe="/")

    @property
    def plugin_modules(self) -> list[str]:
        return [name.strip() for name in self.plugins.split(",") if name.strip()]

    def masked(self) -> dict[str, object]:
        """Effective settings for display, secrets masked. The temporal_* entries are the effective
        connection (config file and profile included); a bad one raises SettingsError."""
        shown: dict[str, object] = {}
        for name, value in self.model_dump().items():
            if isinstance(value, SecretStr):
                value = "****" if value.get_secret_value() else ""
            shown[name] = str(value) if isinstance(value, Path) else value
        shown["ledger_url"] = mask_url(self.ledger_store_url)  # the store in effect, its password masked
        shown["artifact_url"] = mask_url(self.artifact_store_url)
        shown.update(self.temporal_connection().masked())
        return shown


def default_host_id() -> str:
    """The machine's hostname with every character outside [A-Za-z0-9_.-] replaced by '_'."""
    import re
    import socket

    return re.sub(r"[^A-Za-z0-9_.-]", "_", socket.gethostname())[:200] or "host"


def model_queue(task_queue: str, provider: str) -> str:
    """The task queue of a provider's model calls (RATCHET_MODEL_QUEUES): `{task_queue}/model/{provider}`."""
    return f"{task_queue}/model/{provider}"


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
    "temporal_address",
    "task_queue",
    "workspace_root",
    "artifact_dir",
    "ledger_path",
    "max_cached_workflows",
    "plugins",
    "versioning",
    "deployment",
    "build_id",
    "promote",
)


def worker_environment(settings: Settings, **extra: str) -> dict[str, str]:
    """The environment of a `python -m ratchet.worker` process serving `settings`' server, queue, paths,
    cache size and plugins. Inherited TEMPORAL_*, RATCHET_* and model providers' OPENAI_* and ANTHROPIC_*
    variables are left out, so the process sees only what is given here (and in `extra`)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RATCHET_", "TEMPORAL_", "OPENAI_", "ANTHROPIC_"))}
    for name in WORKER_PROCESS_FIELDS:
        alias = Settings.model_fields[name].validation_alias
        assert isinstance(alias, AliasChoices)
        value = getattr(settings, name)
        if value is not None:
            env[str(alias.choices[0])] = str(value)
    env.update(extra)
    return env
