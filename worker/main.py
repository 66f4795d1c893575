"""`ratchet worker` / `python -m ratchet.worker`: run a Ratchet worker until SIGINT or SIGTERM.

Beside the worker on RATCHET_TASK_QUEUE runs this host's workspace worker on
RATCHET_TASK_QUEUE@RATCHET_HOST_ID (RatchetPlugin.run_worker): the tool calls, undos and
verifications of the runs whose workspace is on this host. SIGTERM (or SIGINT) drains both at
once: the workers stop polling, so they take no new workflow or activity tasks; running activities
get RATCHET_SHUTDOWN_GRACE_S to finish, then are cancelled (an activity that heartbeats sees the
cancellation; its retry runs on another worker); then the process exits 0. A second signal stops
at once (exit 1), as does a drain still stuck DRAIN_MARGIN_S past the grace period (an activity
that neither finishes nor heartbeats).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import signal
import sys
from datetime import timedelta
from typing import Any

from temporalio.client import Client
from temporalio.worker import Worker

from ratchet.ops.connection import EXIT_UNREACHABLE, TemporalUnreachable
from ratchet.ops.logs import configure_logging
from ratchet.ops.metrics import metrics_runtime
from ratchet.ops.process import exit_now
from ratchet.ops.settings import Settings, SettingsError, load_settings
from ratchet.ops.tracing import flush_tracing
from ratchet.payloads.connect import connect
from ratchet.plugin import Activities, RatchetOptions, RatchetPlugin, carried_plugin, load_plugins

__all__ = ["Activities", "DrainIncomplete", "build_worker", "connect", "load_plugins", "main", "serve"]
"""Tests, the bench and devtools import Activities, connect and load_plugins from here too."""

log = logging.getLogger("ratchet.worker")
DRAIN_MARGIN_S = 10.0


def build_worker(client: Client, settings: Settings, activities: Activities | None = None, **overrides: Any) -> Worker:
    """A worker on settings' task queue with settings' slots, cache and shutdown grace, running
    Ratchet through `RatchetPlugin`: the one the client was connected with, else one over
    `RatchetOptions.from_settings(settings)` that keeps the client's data converter.
    `activities`: prebuilt activity objects (tests reach in for hooks). `overrides`: `Worker`
    arguments; workflows or activities given there replace Ratchet's of the same name."""
    options: dict[str, Any] = dict(
        task_queue=settings.task_queue,
        max_concurrent_activities=settings.max_concurrent_activities,
        max_concurrent_workflow_tasks=settings.max_concurrent_workflow_tasks,
        max_cached_workflows=settings.max_cached_workflows,
        graceful_shutdown_timeout=timedelta(seconds=settings.shutdown_grace_s),
    )
    options.update(overrides)
    if carried_plugin(client) is not None:
        if activities is not None:  # the carried plugin skips activities the worker already has
            options["activities"] = [*options.get("activities", []), *activities.all()]
        return Worker(client, **options)
    if activities is not None:
        plugin = RatchetPlugin(
            dataclasses.replace(activities.options, data_converter=client.data_converter),
            activities=activities,
        )
    else:
        plugin = RatchetPlugin(RatchetOptions.from_settings(settings, data_converter=client.data_converter))
    options["plugins"] = [*options.get("plugins", []), plugin]
    return Worker(client, **options)


class DrainIncomplete(Exception):
    """The worker was stopped before its running activities finished."""


async def serve(settings: Settings) -> None:
    settings.temporal_connection()  # bad connection settings stop the worker before it opens anything
    runtime = metrics_runtime(settings)
    plugin = RatchetPlugin(RatchetOptions.from_settings(settings))
    client = await connect(settings, runtime=runtime, plugin=plugin)
    worker = build_worker(client, settings)
    first, second = _signals()
    running = asyncio.create_task(worker.run())
    address = client.service_client.config.target_host
    log.info("worker on task queue %r at %s, namespace %r", settings.task_queue, address, client.namespace)
    log.info("workspace activities of runs whose workspace is on this host: task queue %r", settings.host_task_queue)
    if settings.metrics_port is not None:
        log.info("metrics on http://%s:%d/metrics", settings.metrics_host, settings.metrics_port)
    announced = asyncio.create_task(plugin.options.mcp.announce(log))  # each MCP server's tool count
    build = (
        f", build {plugin.build_id} of deployment {settings.deployment_name!r}"
        if settings.versioning
        else ", unversioned"
    )
    print(
        f"ratchet worker ready: task queue {settings.task_queue!r} at {address},"
        f" host queue {settings.host_task_queue!r}{build}",
        flush=True,
    )
    await _first_of(running, first.wait())
    announced.cancel()
    if running.done():
        return await running  # the worker stopped on its own: raise its error
    log.info("draining: polling stopped; running activities have %gs to finish", settings.shutdown_grace_s)
    drained = asyncio.create_task(plugin.shutdown_worker(worker))  # and the host queue's worker, at once
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
    except TemporalUnreachable as exc:
        print(f"ratchet worker: {exc}", file=sys.stderr, flush=True)
        exit_now(EXIT_UNREACHABLE)
    except DrainIncomplete as exc:
        log.error("%s", exc)
        exit_now(1)
    except Exception:
        log.exception("worker stopped on an error")
        exit_now(1)
    exit_now(0)
