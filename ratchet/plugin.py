"""`RatchetPlugin`: the one place a Temporal client and worker get Ratchet.

A Temporal SDK plugin (`temporalio.plugin.SimplePlugin`). On a worker it registers
`AgentWorkflow` and Ratchet's activities (model calls, run preparation, tools and their undos,
checkpoints), and the worker interceptors: tracing (RATCHET_OTEL), log context, metrics and
secret redaction, in that order, outermost first. On a client it sets Ratchet's data converter
(pydantic JSON, and the codecs of RATCHET_CODEC_KEYS and RATCHET_CLAIM_CHECK_BYTES) and tracing.
A client or worker that already has a TracingInterceptor keeps it and gets no second one.

Everything it wires comes from `RatchetOptions`: backends (ledger, artifact store), registries
(profiles, tools, model providers), the data converter and the settings.
`RatchetOptions.from_settings` builds the defaults; pass your own backends there.

    options = RatchetOptions.from_settings(load_settings(), ledger=MyLedger(...))
    client = await Client.connect("localhost:7233", plugins=[RatchetPlugin(options)])
    worker = Worker(client, task_queue="agents", workflows=[MyWorkflow], activities=[my_activity])

A plugin given to `Client.connect` applies to every worker built on that client (give it to the
worker then, not again). Given to a `Worker` alone, it also makes the worker use the options' data
converter (Ratchet's workflow needs it; the worker then runs on a copy of the client that has it).
Your own workflows and activities win: Ratchet skips any of its workflows or activities whose name
the worker already registers.

`connect` makes a client for settings' Temporal connection (`Settings.temporal_connection`:
Temporal's env config, TEMPORAL_CONFIG_FILE / TEMPORAL_PROFILE and the TEMPORAL_* variables).
"""

from __future__ import annotations

import dataclasses
import importlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import temporalio.activity
import temporalio.workflow
from temporalio.client import Client, ClientConfig
from temporalio.converter import DataConverter
from temporalio.plugin import SimplePlugin
from temporalio.runtime import Runtime
from temporalio.worker import WorkerConfig

from ratchet.activities.checkpoints import CheckpointActivities
from ratchet.activities.model import ModelActivities
from ratchet.activities.prepare import RunPreparer
from ratchet.activities.tools import ToolActivities
from ratchet.core.profiles import ProfileRegistry, default_profiles
from ratchet.core.tools import ToolRegistry, default_registry
from ratchet.models.builtin import builtin_providers
from ratchet.models.provider import ProviderRegistry
from ratchet.ops.logs import LogContextInterceptor
from ratchet.ops.metrics import MetricsInterceptor
from ratchet.ops.redaction import MIN_SECRET_CHARS, RedactSecretsInterceptor, secret_values
from ratchet.ops.settings import Settings, SettingsError, load_settings
from ratchet.ops.tracing import tracing_interceptors
from ratchet.payloads.converter import data_converter
from ratchet.stores.artifacts import ArtifactStore, DirectoryArtifactStore
from ratchet.stores.ledger import Ledger, SqliteLedger
from ratchet.workflows.agent import AgentWorkflow

log = logging.getLogger("ratchet.plugin")

PLUGIN_NAME = "ratchet"
WORKFLOWS: tuple[type, ...] = (AgentWorkflow,)
BUILTIN_TOOL_MODULES = (
    "ratchet.activities.workspace_tools",
    "ratchet.activities.tracker_tools",
    "ratchet.activities.agent_tools",
    "ratchet.activities.time_tools",
)
"""Modules whose `@tool` functions are Ratchet's built-in tools."""


def builtin_tools() -> ToolRegistry:
    """The tool registry with Ratchet's built-in tools in it (imports their modules). It is the
    registry `ratchet.core.tools.tool` registers into, so tools of RATCHET_PLUGINS modules (or any
    module using `@tool`) imported before a worker starts are in it too."""
    for name in BUILTIN_TOOL_MODULES:
        importlib.import_module(name)
    return default_registry


def builtin_profiles() -> ProfileRegistry:
    """The profile registry with the built-in `coder` profile; `register_profile` registers into it."""
    return default_profiles


def load_plugins(settings: Settings) -> None:
    """Import RATCHET_PLUGINS modules; importing them registers their tools and profiles."""
    for name in settings.plugin_modules:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            raise SettingsError(f"RATCHET_PLUGINS: cannot import {name!r}: {exc}") from None


@dataclass(frozen=True, kw_only=True)
class RatchetOptions:
    """What `RatchetPlugin` wires. Build it with `from_settings`, giving the fields you replace."""

    settings: Settings
    """Worker settings: model endpoint, workspace root, local tools, search attributes, secrets to
    redact, tracing (`ratchet.ops.settings`; RATCHET_*, OPENAI_* and TEMPORAL_* variables)."""
    ledger: Ledger
    """Idempotency ledger of side effects (`ratchet.stores.ledger.Ledger`); default: `SqliteLedger`
    at RATCHET_LEDGER_PATH. Every worker of a task queue must see the same ledger."""
    artifacts: ArtifactStore
    """Content-addressed blob store for transcripts, tool outputs, snapshots and claim-checked
    payloads (`ratchet.stores.artifacts.ArtifactStore`); default: `DirectoryArtifactStore` at
    RATCHET_ARTIFACT_DIR. Every worker, and every client that reads large results, must reach it."""
    profiles: ProfileRegistry
    """Agent profiles a run can name; default: `builtin_profiles()` (with RATCHET_PLUGINS' profiles)."""
    tools: ToolRegistry
    """Tools the profiles can use; default: `builtin_tools()` (with RATCHET_PLUGINS' tools)."""
    providers: ProviderRegistry
    """Model providers a run's `model.provider` can name; default: `builtin_providers(settings,
    artifacts)`: `openai` (OPENAI_API_KEY / OPENAI_BASE_URL) and `scripted`."""
    data_converter: DataConverter
    """Converter of every payload: Ratchet's pydantic JSON, then encryption (RATCHET_CODEC_KEYS)
    and the claim check over `artifacts` (RATCHET_CLAIM_CHECK_BYTES); default:
    `ratchet.payloads.converter.data_converter(settings, artifacts)`. Clients and workers of a
    namespace must agree on it."""

    @classmethod
    def from_settings(cls, settings: Settings | None = None, **given: Any) -> RatchetOptions:
        """Options with every field not in `given` built from `settings` (default: the environment,
        `load_settings()`). Imports the RATCHET_PLUGINS modules first, so their tools and profiles
        are registered. The only place Ratchet builds its default backends."""
        unknown = set(given) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise TypeError(f"RatchetOptions has no field {', '.join(sorted(unknown))}")
        settings = settings if settings is not None else load_settings()
        load_plugins(settings)
        artifacts = given["artifacts"] if "artifacts" in given else DirectoryArtifactStore(settings.artifact_dir)
        return cls(
            settings=settings,
            ledger=given["ledger"] if "ledger" in given else SqliteLedger(settings.ledger_path),
            artifacts=artifacts,
            profiles=given["profiles"] if "profiles" in given else builtin_profiles(),
            tools=given["tools"] if "tools" in given else builtin_tools(),
            providers=given["providers"] if "providers" in given else builtin_providers(settings, artifacts),
            data_converter=given["data_converter"] if "data_converter" in given else data_converter(settings, artifacts),
        )


class Activities:
    """Every activity object a worker runs, over the options' backends (tests reach in for hooks).
    `options` may be bare settings: `RatchetOptions.from_settings(settings)`."""

    def __init__(self, options: RatchetOptions | Settings, client: Client | None = None) -> None:
        if isinstance(options, Settings):
            options = RatchetOptions.from_settings(options)
        self.options = options
        settings, artifacts, ledger = options.settings, options.artifacts, options.ledger
        self.preparer = RunPreparer(settings, options.profiles, options.tools, options.providers, artifacts, ledger)
        self.model = ModelActivities(options.providers, artifacts, ledger)
        self.tools = ToolActivities(options.tools, settings.workspace_root, artifacts, ledger, settings)
        self.checkpoints = CheckpointActivities(settings.workspace_root, artifacts, client)

    def all(self) -> list[Callable]:
        return [
            self.model.call, self.preparer.prepare, self.checkpoints.verify, self.checkpoints.fork,
            *self.tools.activities(),
        ]


class RatchetPlugin(SimplePlugin):
    """Ratchet on a Temporal client and/or worker (see the module docstring).

    `activities`: prebuilt activity objects to register instead of one `Activities` per worker
    (their options must be these options); for tests that reach into them."""

    def __init__(self, options: RatchetOptions | None = None, *, activities: Activities | None = None) -> None:
        self.options = options if options is not None else RatchetOptions.from_settings()
        self.prebuilt = activities
        self._tracing: list[Any] | None = None
        super().__init__(
            PLUGIN_NAME, data_converter=self.options.data_converter, workflows=_add_missing(WORKFLOWS, _workflow_name),
        )

    def configure_client(self, config: ClientConfig) -> ClientConfig:
        config = super().configure_client(config)
        present = list(config.get("interceptors") or [])
        config["interceptors"] = [*present, *self._tracing_unless(present)]
        return config

    def configure_worker(self, config: WorkerConfig) -> WorkerConfig:
        client = _with_converter(config["client"], self.options.data_converter)  # type: ignore[typeddict-item]
        config["client"] = client
        config = super().configure_worker(config)
        # The worker runs its client's interceptors first, then these; ours go outermost first:
        # tracing, logs and metrics see errors after secrets were redacted.
        own = list(config.get("interceptors") or [])
        present = [*(client.config(active_config=True).get("interceptors") or []), *own]
        secrets = secret_values(self.options.settings)
        if client.api_key and len(client.api_key) >= MIN_SECRET_CHARS and client.api_key not in secrets:
            secrets = sorted([*secrets, client.api_key], key=len, reverse=True)  # e.g. from a config file
        ours = [LogContextInterceptor(), MetricsInterceptor(), RedactSecretsInterceptor(secrets)]
        ours = [i for i in ours if not any(type(p) is type(i) for p in present)]  # the plugin applied twice
        config["interceptors"] = [*own, *self._tracing_unless(present), *ours]
        activities = self.prebuilt if self.prebuilt is not None else Activities(self._options_for(config), client)
        config["activities"] = _add_missing(activities.all(), _activity_name)(config.get("activities"))
        return config

    def _tracing_unless(self, present: Sequence[Any]) -> list[Any]:
        """With RATCHET_OTEL, the tracing interceptor (one per plugin, shared by its client and
        workers), unless a TracingInterceptor is already there (your own, or the client's)."""
        if not self.options.settings.otel:
            return []
        try:
            from temporalio.contrib.opentelemetry import TracingInterceptor
        except ImportError:
            return tracing_interceptors(self.options.settings)  # raises SettingsError: how to install it
        if any(isinstance(i, TracingInterceptor) for i in present):
            return []
        if self._tracing is None:
            self._tracing = tracing_interceptors(self.options.settings)
        return self._tracing

    def _options_for(self, config: WorkerConfig) -> RatchetOptions:
        """Without a workflow cache, a worker's evictions cancel local activities: then no local tools,
        whatever RATCHET_MAX_CACHED_WORKFLOWS says (run.prepare decides from the settings)."""
        settings = self.options.settings
        if config.get("max_cached_workflows", 1000) == 0 and settings.max_cached_workflows != 0:
            return dataclasses.replace(self.options, settings=settings.model_copy(update={"max_cached_workflows": 0}))
        return self.options


def _with_converter(client: Client, converter: DataConverter) -> Client:
    """`client`, or a client on the same connection with `converter` when it has another."""
    if client.data_converter is converter:
        return client
    log.info("RatchetPlugin: the worker uses Ratchet's data converter (its client has another)")
    config = client.config(active_config=True)
    config["data_converter"] = converter
    config["plugins"] = []  # already applied to this configuration
    return Client(**config)


def _workflow_name(cls: type) -> str | None:
    defn = temporalio.workflow._Definition.from_class(cls)
    return defn.name if defn is not None else None


def _activity_name(fn: Callable) -> str | None:
    defn = temporalio.activity._Definition.from_callable(fn)
    return defn.name if defn is not None else None


def _add_missing(ours: Sequence[Any], name: Callable[[Any], str | None]) -> Callable[[Sequence[Any] | None], list[Any]]:
    """A SimplePlugin parameter: the worker's own list plus those of `ours` whose name it lacks."""

    def add(existing: Sequence[Any] | None) -> list[Any]:
        existing = list(existing or [])
        taken = {name(item) for item in existing}
        return existing + [item for item in ours if name(item) not in taken]

    return add


def carried_plugin(client: Client) -> RatchetPlugin | None:
    """The RatchetPlugin `client` was connected with (workers built on it inherit it), if any."""
    return next((p for p in client.config()["plugins"] if isinstance(p, RatchetPlugin)), None)


async def connect(settings: Settings, runtime: Runtime | None = None, *, plugin: RatchetPlugin | None = None) -> Client:
    """A client for settings' Temporal connection (`Settings.temporal_connection`; raises
    SettingsError naming a bad variable). With `plugin`, the client carries it: its data converter
    and tracing, and every worker built on the client runs Ratchet. Without, the client gets the
    settings' data converter and tracing only (the CLI's case: no ledger, no plugin modules).
    `runtime`: the worker's Temporal runtime when it serves metrics."""
    connection = settings.temporal_connection().connect_kwargs()
    if plugin is not None:
        return await Client.connect(**connection, plugins=[plugin], runtime=runtime)
    return await Client.connect(
        **connection, data_converter=data_converter(settings), interceptors=tracing_interceptors(settings), runtime=runtime,
    )
