"""One private Ratchet installation on disk: workspace root, artifacts, ledger, tracker, and the
environment a worker process needs to use them, plus helpers every chaos module shares."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import sys
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle
from temporalio.service import RPCError

from devtools.workers import WorkerProcess
from ratchet.ops.settings import Settings, worker_environment

ROOT = Path(__file__).resolve().parents[2]
PLUGINS = "tests.plugins.chaos_tools"
T = TypeVar("T")


@dataclass
class Stack:
    """Where a chaos run keeps its outside world, and how its workers are configured."""

    base: Path
    address: str
    task_queue: str = field(default_factory=lambda: f"chaos-{uuid.uuid4().hex[:10]}")
    cached_workflows: int = 0
    """0: every workflow task replays the history so far (non-determinism shows at once)."""
    env: dict[str, str] = field(default_factory=dict)

    @property
    def workspace_root(self) -> Path:
        return self.base / "workspaces"

    @property
    def artifact_dir(self) -> Path:
        return self.base / "artifacts"

    @property
    def ledger_path(self) -> Path:
        return self.base / "ledger.sqlite3"

    @property
    def tracker_path(self) -> Path:
        return self.base / "tracker.sqlite3"

    def workspace(self, name: str) -> Path:
        return self.workspace_root / name

    def worker_env(self) -> dict[str, str]:
        """The environment of a `python -m ratchet.worker` process for this stack."""
        pythonpath = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
        return worker_environment(self.settings(), **{"PYTHONPATH": pythonpath, **self.env})

    def settings(self, **overrides: object) -> Settings:
        """The same configuration as Settings, for in-process workers and direct activity calls."""
        values: dict[str, object] = dict(
            temporal_address=self.address, task_queue=self.task_queue, workspace_root=self.workspace_root,
            artifact_dir=self.artifact_dir, ledger_path=self.ledger_path, tracker_path=self.tracker_path,
            max_cached_workflows=self.cached_workflows, plugins=PLUGINS, codec_keys=None,
        )
        values.update(overrides)
        return Settings(**values)

    def worker_command(self) -> list[str]:
        return [sys.executable, "-m", "ratchet.worker"]

    def worker(self, log: Path, ready_timeout: float = 60) -> WorkerProcess:
        """A `python -m ratchet.worker` process for this stack (not started), its output in `log`."""
        return WorkerProcess(self.worker_command(), env=self.worker_env(), cwd=ROOT, log=log, ready_timeout=ready_timeout)


def rows(path: Path, table: str, prefix: str = "") -> list[tuple[str, str, str]]:
    """(idempotency_key, title/recipient, body) of a tracker table, keys starting with `prefix`."""
    if not path.exists():
        return []
    column = "title" if table == "tickets" else "recipient"
    with sqlite3.connect(path, timeout=30) as conn:
        known = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if table not in known:
            return []
        query = (f"SELECT idempotency_key, {column}, body FROM {table}"
                 " WHERE substr(idempotency_key, 1, ?) = ? ORDER BY id")
        return list(conn.execute(query, (len(prefix), prefix)))


def restarted_calls(ledger_path: Path) -> list[str]:
    """Ledger keys of tool calls and undos that started more than once: a worker died (or the
    attempt failed) after the call had begun, so the retry met a STARTED entry."""
    if not ledger_path.exists():
        return []
    with sqlite3.connect(ledger_path, timeout=30) as conn:
        found = conn.execute("SELECT key FROM ledger WHERE starts > 1 ORDER BY started_at").fetchall()
    return [key for (key,) in found if not key.endswith("/model")]


def tree(root: Path) -> dict[str, bytes | str]:
    """Every file under `root` (bytes) and symlink ('-> target'), by relative path."""
    out: dict[str, bytes | str] = {}
    if not root.exists():
        return out
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.is_symlink():
            out[rel] = f"-> {os.readlink(path)}"
        elif path.is_file():
            out[rel] = path.read_bytes()
    return out


async def retrying(fn: Callable[[], Awaitable[T]], timeout_s: float = 120, what: str = "call") -> T:
    """Retry `fn` while the Temporal server is unreachable (a restart in progress)."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    delay = 0.2
    while True:
        try:
            return await fn()
        except RPCError as err:
            if asyncio.get_running_loop().time() > deadline:
                raise TimeoutError(f"{what}: the server stayed unavailable ({err})") from err
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)


async def task_failures(handle: WorkflowHandle) -> list[str]:
    """Messages of every WorkflowTaskFailed event: a run stuck retrying a task shows here."""
    history = await handle.fetch_history()
    return [
        e.workflow_task_failed_event_attributes.failure.message
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
    ]


_RUNTIME = None


async def connect(address: str) -> Client:
    """A client whose core logs only errors: the retries while the server restarts are expected."""
    from ratchet.payloads.converter import BASE_CONVERTER
    from temporalio.runtime import LoggingConfig, Runtime, TelemetryConfig, TelemetryFilter

    global _RUNTIME
    if _RUNTIME is None:
        quiet = TelemetryFilter(core_level="ERROR", other_level="ERROR")
        _RUNTIME = Runtime(telemetry=TelemetryConfig(logging=LoggingConfig(filter=quiet)))
    return await Client.connect(address, data_converter=BASE_CONVERTER, runtime=_RUNTIME)
