"""`ratchet worker` / `python -m worker`: run a Ratchet worker until SIGINT or SIGTERM."""

from __future__ import annotations

import asyncio
import importlib
import logging
import signal
from collections.abc import Callable
from datetime import timedelta

from temporalio.client import Client
from temporalio.worker import Worker

import activities.tracker_tools  # noqa: F401  (registers the built-in tools)
import activities.workspace_tools  # noqa: F401
from activities.checkpoints import CheckpointActivities
from activities.ledger import SqliteLedger
from activities.model import ModelActivities
from activities.prepare import RunPreparer
from activities.tools import ToolActivities
from ratchet.artifacts import DirectoryArtifactStore
from ratchet.converter import data_converter
from ratchet.process import exit_now
from ratchet.profiles import ProfileRegistry, default_profiles
from ratchet.settings import Settings, SettingsError, load_settings
from ratchet.tools import ToolRegistry, default_registry
from workflows.agent import AgentWorkflow

log = logging.getLogger("ratchet.worker")


async def connect(settings: Settings) -> Client:
    api_key = settings.temporal_api_key.get_secret_value() if settings.temporal_api_key else None
    tls = _tls(settings)
    return await Client.connect(
        settings.temporal_address,
        namespace=settings.temporal_namespace,
        api_key=api_key,
        tls=tls if tls is not None else bool(api_key),
        data_converter=data_converter(settings),
    )


def _tls(settings: Settings):
    if settings.temporal_tls_cert is None:
        return None
    from temporalio.service import TLSConfig

    return TLSConfig(
        client_cert=settings.temporal_tls_cert.read_bytes(),
        client_private_key=settings.temporal_tls_key.read_bytes() if settings.temporal_tls_key else None,
    )


class Activities:
    """Every activity object a worker runs, built from settings (tests reach in for hooks)."""

    def __init__(
        self, settings: Settings, client: Client | None = None,
        profiles: ProfileRegistry | None = None, tools: ToolRegistry | None = None,
    ) -> None:
        artifacts = DirectoryArtifactStore(settings.artifact_dir)
        tools = tools or default_registry
        ledger = SqliteLedger(settings.ledger_path)
        self.model = ModelActivities(settings, artifacts, ledger)
        self.preparer = RunPreparer(settings, profiles or default_profiles, tools, artifacts)
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
        max_cached_workflows=settings.max_cached_workflows,
        graceful_shutdown_timeout=timedelta(seconds=10),
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


async def serve(settings: Settings) -> None:
    load_plugins(settings)
    client = await connect(settings)
    worker = build_worker(client, settings)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    log.info("worker on task queue %r at %s", settings.task_queue, settings.temporal_address)
    print(f"ratchet worker ready: task queue {settings.task_queue!r} at {settings.temporal_address}", flush=True)
    async with worker:
        await stop.wait()
        log.info("shutting down: finishing running tasks")


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        settings = load_settings()
        asyncio.run(serve(settings))
    except SettingsError as exc:
        print(f"ratchet worker: {exc}", flush=True)
        exit_now(2)
    except Exception:
        log.exception("worker stopped on an error")
        exit_now(1)
    exit_now(0)
