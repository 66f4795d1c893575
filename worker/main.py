"""`ratchet worker` / `python -m ratchet.worker`: run a Ratchet worker until SIGINT or SIGTERM.

SIGTERM (or SIGINT) drains: the worker stops polling, so it takes no new workflow or activity
tasks; running activities get RATCHET_SHUTDOWN_GRACE_S to finish, then are cancelled (an activity
that heartbeats sees the cancellation; its retry runs on another worker); then the process exits
0. A second signal stops at once (exit 1), as does a drain still stuck DRAIN_MARGIN_S past the
grace period (an activity that neither finishes nor heartbeats).
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import signal
import sys
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

from temporalio.client import Client
from temporalio.runtime import Runtime
from temporalio.worker import Worker

import ratchet.activities.tracker_tools  # noqa: F401  (registers the built-in tools)
import ratchet.activities.agent_tools  # noqa: F401
import ratchet.activities.time_tools  # noqa: F401
import ratchet.activities.workspace_tools  # noqa: F401
from ratchet.activities.checkpoints import CheckpointActivities
from ratchet.stores.ledger import SqliteLedger
from ratchet.activities.model import ModelActivities
from ratchet.activities.prepare import RunPreparer
from ratchet.activities.tools import ToolActivities
from ratchet.stores.artifacts import DirectoryArtifactStore
from ratchet.payloads.converter import data_converter
from ratchet.ops.logs import LogContextInterceptor, configure_logging
from ratchet.ops.metrics import MetricsInterceptor, metrics_runtime
from ratchet.ops.process import exit_now
from ratchet.core.profiles import ProfileRegistry, default_profiles
from ratchet.ops.redaction import RedactSecretsInterceptor, secret_values
from ratchet.ops.settings import Settings, SettingsError, load_settings
from ratchet.core.tools import ToolRegistry, default_registry
from ratchet.ops.tracing import flush_tracing, tracing_interceptors
from ratchet.workflows.agent import AgentWorkflow

log = logging.getLogger("ratchet.worker")
DRAIN_MARGIN_S = 10.0


async def connect(settings: Settings, runtime: Runtime | None = None) -> Client:
    """A client with Ratchet's data converter (codecs) and, with RATCHET_OTEL, tracing.
    `runtime`: the worker's Temporal runtime when it serves metrics (CLI commands pass none)."""
    api_key = settings.temporal_api_key.get_secret_value() if settings.temporal_api_key else None
    tls = _tls(settings)
    return await Client.connect(
        settings.temporal_address,
        namespace=settings.temporal_namespace,
        api_key=api_key,
        tls=tls if tls is not None else bool(api_key),
        data_converter=data_converter(settings),
        interceptors=tracing_interceptors(settings),
        runtime=runtime,
    )


def _tls(settings: Settings):
    if settings.temporal_tls_cert is None:
        return None
    from temporalio.service import TLSConfig

    return TLSConfig(
        client_cert=_read(settings.temporal_tls_cert, "TEMPORAL_TLS_CLIENT_CERT_PATH"),
        client_private_key=_read(settings.temporal_tls_key, "TEMPORAL_TLS_CLIENT_KEY_PATH") if settings.temporal_tls_key else None,
    )


def _read(path: Path, env_name: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise SettingsError(f"{env_name}: cannot read {path}: {exc.strerror}") from None


class Activities:
    """Every activity object a worker runs, built from settings (tests reach in for hooks)."""

    def __init__(
        self, settings: Settings, client: Client | None = None,
        profiles: ProfileRegistry | None = None, tools: ToolRegistry | None = None,
    ) -> None:
        artifacts = DirectoryArtifactStore(settings.artifact_dir)
        tools = tools or default_registry
        ledger = SqliteLedger(settings.ledger_path)
        self.preparer = RunPreparer(settings, profiles or default_profiles, tools, artifacts, ledger)
        self.model = ModelActivities(settings, artifacts, ledger)
        self.tools = ToolActivities(tools, settings.workspace_root, artifacts, ledger, settings)
        self.checkpoints = CheckpointActivities(settings.workspace_root, artifacts, client)

    def all(self) -> list[Callable]:
        return [
            self.model.call, self.preparer.prepare, self.checkpoints.verify, self.checkpoints.fork,
            *self.tools.activities(),
        ]


def build_worker(client: Client, settings: Settings, activities: Activities | None = None, **overrides) -> Worker:
    activities = activities or Activities(settings, client)
    options = dict(
        task_queue=settings.task_queue,
        workflows=[AgentWorkflow],
        activities=activities.all(),
        max_concurrent_activities=settings.max_concurrent_activities,
        max_concurrent_workflow_tasks=settings.max_concurrent_workflow_tasks,
        max_cached_workflows=settings.max_cached_workflows,
        graceful_shutdown_timeout=timedelta(seconds=settings.shutdown_grace_s),
        # outermost first: logs and metrics see errors after secrets were redacted
        interceptors=[
            LogContextInterceptor(), MetricsInterceptor(), RedactSecretsInterceptor(secret_values(settings)),
        ],
    )
    options.update(overrides)
    return Worker(client, **options)


def load_plugins(settings: Settings) -> None:
    """Import RATCHET_PLUGINS modules; importing them registers their tools and profiles."""
    for name in settings.plugin_modules:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            raise SettingsError(f"RATCHET_PLUGINS: cannot import {name!r}: {exc}") from None


class DrainIncomplete(Exception):
    """The worker was stopped before its running activities finished."""


async def serve(settings: Settings) -> None:
    load_plugins(settings)
    client = await connect(settings, runtime=metrics_runtime(settings))
    worker = build_worker(client, settings)
    first, second = _signals()
    running = asyncio.create_task(worker.run())
    log.info("worker on task queue %r at %s", settings.task_queue, settings.temporal_address)
    if settings.metrics_port is not None:
        log.info("metrics on http://%s:%d/metrics", settings.metrics_host, settings.metrics_port)
    print(f"ratchet worker ready: task queue {settings.task_queue!r} at {settings.temporal_address}", flush=True)
    await _first_of(running, first.wait())
    if running.done():
        return await running  # the worker stopped on its own: raise its error
    log.info("draining: polling stopped; running activities have %gs to finish", settings.shutdown_grace_s)
    drained = asyncio.create_task(worker.shutdown())
    await _first_of(drained, second.wait(), timeout=settings.shutdown_grace_s + DRAIN_MARGIN_S)
    flush_tracing()
    if not drained.done():
        raise DrainIncomplete("stopped before running activities finished (second signal, or drain timed out)")
    await drained
    await running
    log.info("drained; exiting")


def _signals() -> tuple[asyncio.Event, asyncio.Event]:
    """Events for the first and the second SIGINT/SIGTERM."""
    first, second = asyncio.Event(), asyncio.Event()

    def received() -> None:
        (second if first.is_set() else first).set()

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, received)
    return first, second


async def _first_of(task: asyncio.Task, other, timeout: float | None = None) -> None:
    waiter = asyncio.ensure_future(other)
    try:
        await asyncio.wait({task, waiter}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()


def main() -> None:
    try:
        settings = load_settings()
    except SettingsError as exc:
        print(f"ratchet worker: {exc}", file=sys.stderr, flush=True)
        exit_now(2)
    configure_logging(settings)
    try:
        asyncio.run(serve(settings))
    except SettingsError as exc:
        print(f"ratchet worker: {exc}", file=sys.stderr, flush=True)
        exit_now(2)
    except DrainIncomplete as exc:
        log.error("%s", exc)
        exit_now(1)
    except Exception:
        log.exception("worker stopped on an error")
        exit_now(1)
    exit_now(0)
