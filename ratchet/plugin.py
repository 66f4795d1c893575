"""`RatchetPlugin`: the one place a Temporal client and worker get Ratchet.

A Temporal SDK plugin (`temporalio.plugin.SimplePlugin`). On a worker it registers `AgentWorkflow`, `RollbackWorkflow`
(a closed run's rollback), `DeployGuardWorkflow` (a ramp that watches itself), `RatchetFlag` (a person's flag on a
run) and Ratchet's activities (model calls, run preparation, tools and their undos, checkpoints, workspaces, the
guard's), and the worker interceptors: tracing (RATCHET_OTEL), log context, metrics, secret redaction and the start
guard (a start with the wrong number of inputs fails as InvalidInput, ratchet/start_guard.py), in that order,
outermost first. Beside every such worker it runs a second one on this host's queue `{task queue}@{RATCHET_HOST_ID}`
with the activities that touch a run's workspace (`run_worker`, `host_worker`; docs/ARCHITECTURE.md, "Workspaces
across hosts"). On a client it sets Ratchet's data converter (pydantic JSON, encryption for RATCHET_CODEC_KEYS,
offload over RATCHET_CLAIM_CHECK_BYTES) and tracing. A client or worker that already has a TracingInterceptor keeps it
and gets no second one.

Everything it wires comes from `RatchetOptions` (ratchet/options.py): backends (ledger, artifact store), registries
(profiles, tools, model providers), the data converter and the settings; `from_settings` builds the defaults.

    options = RatchetOptions.from_settings(ledger=MyLedger(...))   # settings from the environment
    client = await Client.connect("localhost:7233", plugins=[RatchetPlugin(options)])
    worker = Worker(client, task_queue="agents", workflows=[MyWorkflow], activities=[my_activity])

A plugin given to `Client.connect` applies to every worker built on that client (give it to the
worker then, not again). Given to a `Worker` alone, it also makes the worker use the options' data
converter (Ratchet's workflow needs it; the worker then runs on a copy of the client that has it).
Your own workflows and activities win: Ratchet skips any of its workflows or activities whose name
the worker already registers.

`connect` (ratchet/payloads/connect.py, imported here for the worker and replay) makes a client
for settings' Temporal connection (Temporal's env config, TEMPORAL_CONFIG_FILE / TEMPORAL_PROFILE
and the TEMPORAL_* variables).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import weakref
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from temporalio.client import Client, ClientConfig
from temporalio.converter import DataConverter
from temporalio.plugin import SimplePlugin
from temporalio.worker import Worker, WorkerConfig, WorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner


from ratchet.activities.checkpoints import CheckpointActivities
from ratchet.activities.deploys import DeployActivities
from ratchet.activities.schedules import ScheduleActivities
from ratchet.activities.shadows import ShadowActivities
from ratchet.activities.notify import NotifyActivities
from ratchet.activities.judging import JudgeActivities
from ratchet.activities.workspace import host_queue
from ratchet.activities.hosts import WORKSPACE_ACTIVITIES, WorkspaceActivities
from ratchet.contracts.activities import COMPACT, MODEL_CALL, VERIFY
from ratchet.activities.model import ModelActivities
from ratchet.activities.mcp import McpActivities
from ratchet.activities.prepare import RunPreparer
from ratchet.activities.archive import Archive
from ratchet.activities.rollback import RollbackActivities
from ratchet.activities.tools import ToolActivities
from ratchet.deploys.build import default_build_id
from ratchet.deploys.joining import deployment_config, promote_on_start
from ratchet.core.tools import ToolRegistry
from ratchet.ops.logs import LogContextInterceptor
from ratchet.ops.metrics import MetricsInterceptor
from ratchet.ops.redaction import RedactSecretsInterceptor
from ratchet.ops.search_attributes import ensure_search_attributes
from ratchet.mcp.pool import McpPool
from ratchet.ops.secrets import MIN_SECRET_CHARS, secret_values
from ratchet.ops.settings import Settings, SettingsError, model_queue
from ratchet.ops.tracing import tracing_interceptors
from ratchet.payloads.connect import connect as connect  # re-exported: replay and examples import it here
from ratchet.start_guard import StartGuard
from ratchet.workflows.agent import AgentWorkflow
from ratchet.workflows.closed_rollback import RollbackWorkflow
from ratchet.workflows.deploy_guard import DeployGuardWorkflow
from ratchet.workflows.flags import FlagWorkflow
from ratchet.workflows.scheduled_message import ScheduledMessageWorkflow
from ratchet.workflows.notify_delivery import NotifyWorkflow
from ratchet.workflows.shadow_clean import ShadowCleanWorkflow
from ratchet.workflows.sdk_seams import activity_name, workflow_name
from ratchet.options import (  # noqa: F401  (re-exported: the plugin's face, as the README names them)
    BUILTIN_TOOL_MODULES,
    RatchetOptions,
    builtin_profiles,
    builtin_tools,
    load_plugins,
    mcp_pool,
    usable_sandbox,
)

log = logging.getLogger("ratchet.plugin")

PLUGIN_NAME = "ratchet"
WORKFLOWS: tuple[type, ...] = (AgentWorkflow, RollbackWorkflow, DeployGuardWorkflow, FlagWorkflow)
WORKFLOWS += (ScheduledMessageWorkflow, NotifyWorkflow, ShadowCleanWorkflow)


class Activities:
    """Every activity object a worker runs, over the options' backends (tests reach in for hooks).
    `options` may be bare settings: `RatchetOptions.from_settings(settings)`."""

    def __init__(self, options: RatchetOptions | Settings, client: Client | None = None) -> None:
        if isinstance(options, Settings):
            options = RatchetOptions.from_settings(options)
        self.options = options
        settings, artifacts, ledger = options.settings, options.artifacts, options.ledger
        self.mcp = McpActivities(options.mcp, options.profiles, artifacts, ledger)
        self.preparer = RunPreparer(
            settings,
            options.profiles,
            options.tools,
            options.providers,
            artifacts,
            ledger,
            self.mcp,
            client,
        )
        self.model = ModelActivities(options.providers, artifacts, ledger, options.billing)
        self.tools = ToolActivities(
            options.tools, settings.workspace_root, artifacts, ledger, settings, options.sandbox
        )
        self.checkpoints = CheckpointActivities(
            settings.workspace_root, artifacts, client, settings.host_id, options.sandbox, ledger
        )
        self.workspaces = WorkspaceActivities(settings.workspace_root, artifacts, settings.host_id)
        self.rollback = RollbackActivities(client, ledger, artifacts)
        self.archive = Archive(artifacts)
        self.deploys = DeployActivities(client, options.profiles)
        self.schedules = ScheduleActivities(client)
        self.notify = NotifyActivities()
        self.judges = JudgeActivities(options.providers, ledger, options.billing)
        self.shadows = ShadowActivities(ledger)

    def all(self) -> list[Callable]:
        return [
            self.model.call,
            self.model.compact,
            self.preparer.prepare,
            self.checkpoints.verify,
            self.checkpoints.fork,
            *self.tools.activities(),
            *self.workspaces.all(),
            self.rollback.load,
            self.archive.archive,
            self.archive.load,
            self.archive.messages,
            *self.mcp.activities(),
            *self.deploys.all(),
            self.schedules.deliver,
            self.notify.send,
            self.judges.judge,
            self.shadows.forget,
        ]


def host_activity_names(tools: ToolRegistry) -> set[str]:
    """The activities that touch a run's workspace, which the host-queue worker serves: the tools
    declared `workspace=True` and their undos, `checkpoint.verify`, and the workspace activities."""
    names = {VERIFY.name, *WORKSPACE_ACTIVITIES}
    for tool in tools.tools.values():
        if tool.workspace and tool.kind == "activity":
            names.add(f"tool.{tool.name}")
            if tool.undo is not None:
                names.add(f"undo.{tool.name}")
    return names


class RatchetPlugin(SimplePlugin):
    """Ratchet on a Temporal client and/or worker (see the module docstring).

    `activities`: prebuilt activity objects to register instead of one `Activities` per worker
    (their options must be these options); for tests that reach into them."""

    def __init__(self, options: RatchetOptions | None = None, *, activities: Activities | None = None) -> None:
        self.options = options if options is not None else RatchetOptions.from_settings()
        self.prebuilt = activities
        settings = self.options.settings
        self.build_id = settings.build_id or default_build_id(
            self.options.profiles, self.options.tools, self.options.mcp
        )
        """This worker's build in its Worker Deployment (RATCHET_BUILD_ID, else `default_build_id`)."""
        self._tracing: list[Any] | None = None
        self._promoting: set[asyncio.Task] = set()
        self.side_workers: weakref.WeakKeyDictionary[Worker, list[Worker]] = weakref.WeakKeyDictionary()
        """The workers beside each worker: its host queue's, its providers' queues' (RATCHET_MODEL_QUEUES)."""
        super().__init__(
            PLUGIN_NAME,
            data_converter=self.options.data_converter,
            workflows=_add_missing(WORKFLOWS, workflow_name),
            workflow_runner=_ratchet_passed_through,
        )

    def configure_client(self, config: ClientConfig) -> ClientConfig:
        config = super().configure_client(config)
        present = list(config.get("interceptors") or [])
        config["interceptors"] = [*present, *self._tracing_unless(present)]
        return config

    def configure_worker(self, config: WorkerConfig) -> WorkerConfig:
        client = _with_converter(config["client"], self.options.data_converter)
        config["client"] = client
        config = super().configure_worker(config)
        # The worker runs its client's interceptors first, then these; ours go outermost first:
        # tracing, logs and metrics see errors after secrets were redacted.
        own = list(config.get("interceptors") or [])
        present = [*(client.config(active_config=True).get("interceptors") or []), *own]
        secrets = secret_values(self.options.settings, more=self.options.providers.secrets())
        if client.api_key and len(client.api_key) >= MIN_SECRET_CHARS and client.api_key not in secrets:
            secrets = sorted([*secrets, client.api_key], key=len, reverse=True)  # e.g. from a config file
        ours = [LogContextInterceptor(), MetricsInterceptor(), RedactSecretsInterceptor(secrets), StartGuard(WORKFLOWS)]
        ours = [i for i in ours if not any(type(p) is type(i) for p in present)]  # the plugin applied twice
        config["interceptors"] = [*own, *self._tracing_unless(present), *ours]
        activities = self.prebuilt if self.prebuilt is not None else Activities(self._options_for(config), client)
        config["activities"] = _add_missing(activities.all(), activity_name)(config.get("activities"))
        if self.options.settings.versioning and config.get("deployment_config") is None:
            config["deployment_config"] = deployment_config(self.options.settings, self.build_id)
        return config

    async def run_worker(self, worker: Worker, next: Callable[[Worker], Awaitable[None]]) -> None:
        """Check the agent profiles (`ProfileRegistry.problems`: SettingsError naming profile and
        field) and the namespace's search attributes (ratchet/ops/search_attributes.py), then run
        `worker` and, beside it, this host's workspace worker (`host_worker`), started and
        stopped together: when `worker` stops, the host worker is shut down (drained) too; shut
        both down at once with `shutdown_worker` (what `ratchet worker` does on SIGTERM)."""
        next = _closing_mcp(next, self.options.mcp)  # stdio MCP servers stop when the worker has drained
        problems = self.options.profiles.problems()
        if problems:
            raise SettingsError("invalid agent profile: " + "; ".join(problems))
        problems = self.options.tools.problems()
        if problems:
            raise SettingsError("invalid tool: " + "; ".join(problems))
        if self.options.settings.search_attributes:  # else every run would hang on its first upsert
            await ensure_search_attributes(worker.client)
        if worker in self.side_workers:  # once per worker
            return await next(worker)
        versioned = worker.config(active_config=True).get("deployment_config")
        if versioned is not None and versioned.use_worker_versioning:  # in the background: polling starts it
            version, promote = versioned.version, self.options.settings.promote
            task = asyncio.create_task(
                promote_on_start(worker.client, version.deployment_name, version.build_id, promote)
            )
            self._promoting.add(task)
            task.add_done_callback(self._promoting.discard)
        sides = self.side_workers[worker] = [w for w in (self.host_worker(worker), *self.model_workers(worker)) if w]
        if not sides:
            return await next(worker)
        main = asyncio.ensure_future(next(worker))  # the plugin chain's `next` is typed as an Awaitable
        others = [asyncio.create_task(side.run()) for side in sides]
        try:
            await asyncio.wait({main, *others}, return_when=asyncio.FIRST_COMPLETED)
            if not main.done():  # a side worker failed: stop this one too, then raise its error
                await worker.shutdown()
            await asyncio.gather(*(side.shutdown() for side in sides))
            await asyncio.wait({main, *others})
        finally:
            main.cancel()
            for other in others:
                other.cancel()
        for other in others:
            other.result()
        main.result()

    async def shutdown_worker(self, worker: Worker) -> None:
        """Shut `worker` and its side workers (host queue, provider queues) down together (each drains
        with its own grace period)."""
        await asyncio.gather(worker.shutdown(), *(side.shutdown() for side in self.side_workers.get(worker, [])))

    def host_worker(self, worker: Worker) -> Worker | None:
        """A worker on `{worker's task queue}@{RATCHET_HOST_ID}` with only the workspace activities
        of `worker` (the same objects, interceptors, data converter, activity slots and shutdown
        grace); None if `worker` has none. Workspace activities of the runs whose workspace is on
        this host are scheduled there (docs/ARCHITECTURE.md, "Workspaces across hosts")."""
        names = host_activity_names(self.options.tools)
        return _side_worker(worker, host_queue(worker.task_queue, self.options.settings.host_id), names)

    def model_workers(self, worker: Worker) -> list[Worker]:
        """A worker per provider queue (RATCHET_MODEL_QUEUES) with only `model.call`: the queue's
        activities limited by Temporal to `per_second` across all workers
        (`max_task_queue_activities_per_second`), at most `concurrency` at once on this one."""
        found = []
        for provider, queue in self.options.settings.model_queues.items():
            limits: dict[str, Any] = {}
            if queue.per_second is not None:
                limits["max_task_queue_activities_per_second"] = queue.per_second
            if queue.concurrency is not None:
                limits["max_concurrent_activities"] = queue.concurrency
            side = _side_worker(
                worker, model_queue(worker.task_queue, provider), {MODEL_CALL.name, COMPACT.name}, **limits
            )
            if side is not None:
                found.append(side)
        return found

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


def _side_worker(worker: Worker, task_queue: str, names: set[str], **limits: Any) -> Worker | None:
    """A worker on `task_queue` with only the activities of `worker` named in `names` (the same
    objects, interceptors, data converter, activity slots and shutdown grace, unless `limits`
    says otherwise); None if `worker` has none of them."""
    config = worker.config(active_config=True)
    activities = [a for a in config.get("activities") or [] if activity_name(a) in names]
    if not activities:
        return None
    client = config["client"]
    client_config = client.config(active_config=True)
    client_config["plugins"] = []  # applied already; a plugin-carrying client would nest side workers
    options: dict[str, Any] = {
        key: config[key]
        for key in (
            "max_concurrent_activities",
            "graceful_shutdown_timeout",
            "identity",
            "activity_executor",
            "deployment_config",
        )
        if config.get(key) is not None
    }
    options.update(limits)
    return Worker(
        Client(**client_config),
        task_queue=task_queue,
        activities=activities,
        interceptors=list(config.get("interceptors") or []),
        **options,
    )


def _closing_mcp(run: Callable[[Worker], Awaitable[None]], pool: McpPool) -> Callable[[Worker], Awaitable[None]]:
    async def run_then_close(worker: Worker) -> None:
        try:
            await run(worker)
        finally:
            await pool.aclose()

    return run_then_close


def _with_converter(client: Client, converter: DataConverter) -> Client:
    """`client`, or a client on the same connection with `converter` when it has another."""
    if client.data_converter is converter:
        return client
    log.info("RatchetPlugin: the worker uses Ratchet's data converter (its client has another)")
    config = client.config(active_config=True)
    config["data_converter"] = converter
    config["plugins"] = []  # already applied to this configuration
    return Client(**config)


def _ratchet_passed_through(runner: WorkflowRunner | None) -> WorkflowRunner:
    """The worker's workflow runner, with `ratchet` passed through the SDK's sandbox: a user's
    sandboxed workflow in a module that imports `ratchet` (its worker module, say) would otherwise
    re-import Ratchet's wiring inside the sandbox and fail on its restricted imports (urllib); and
    `cryptography` (ratchet.core.decision_proof's: an extension module cannot be imported twice)."""
    if runner is None:
        runner = SandboxedWorkflowRunner()
    if isinstance(runner, SandboxedWorkflowRunner):
        passed = runner.restrictions.with_passthrough_modules("ratchet", "cryptography")
        return dataclasses.replace(runner, restrictions=passed)
    return runner


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
