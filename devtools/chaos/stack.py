"""One private Ratchet installation on disk: workspace root, artifacts, ledger, tracker, and the
environment a worker process needs to use them, plus helpers every chaos module shares.

A stack on several hosts (devtools/chaos/hosts.py) names its host (`host_id`: its own directory
under `base`, so hosts share no directory) and keeps the ledger, the artifacts and the tracker on
servers (`ledger_url`, `artifact_url`, `tracker_url`); the audit's readers below take either."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import sqlite3
import sys
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHistory
from temporalio.service import RPCError

from devtools.versions import WORKING_TREE, Checkout
from devtools.workers import WorkerProcess
from ratchet.client import Unavailable
from ratchet.activities.tracker_tools import TrackerSettings, open_tracker
from ratchet.ops.settings import Settings, worker_environment
from ratchet.stores.urls import POSTGRES_SCHEMES, ledger_path

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
    host_id: str | None = None
    """RATCHET_HOST_ID of its workers; set, the stack's files live under `base/host_id` (None: the
    worker's default host id, files under `base`)."""
    ledger_url: str | None = None
    """RATCHET_LEDGER_URL (None: the SQLite file `ledger_path`)."""
    artifact_url: str | None = None
    """RATCHET_ARTIFACT_URL (None: the directory `artifact_dir`)."""
    tracker_url: str | None = None
    """RATCHET_TRACKER_URL (None: the SQLite file `tracker_path`)."""
    code: Checkout = WORKING_TREE
    """The version of Ratchet's code its workers run (devtools/versions.py; the deploys line runs two)."""
    overrides: dict[str, object] = field(default_factory=dict)
    """Settings of its workers beside the stack's own (a deployment, a build's promotion)."""

    def on_host(self, host_id: str) -> Stack:
        """The same installation (queue, servers) as seen by host `host_id`, with its own files."""
        return dataclasses.replace(self, host_id=host_id)

    @property
    def home(self) -> Path:
        return self.base if self.host_id is None else self.base / self.host_id

    @property
    def workspace_root(self) -> Path:
        return self.home / "workspaces"

    @property
    def artifact_dir(self) -> Path:
        return self.home / "artifacts"

    @property
    def ledger_path(self) -> Path:
        return self.home / "ledger.sqlite3"

    @property
    def tracker_path(self) -> Path:
        return self.home / "tracker.sqlite3"

    @property
    def host_queue(self) -> str:
        return self.settings().host_task_queue

    def workspace(self, name: str) -> Path:
        return self.workspace_root / name

    def worker_env(self) -> dict[str, str]:
        """The environment of a `python -m ratchet.worker` process for this stack."""
        pythonpath = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
        stores = {
            name: value for name, value in (
                ("RATCHET_HOST_ID", self.host_id), ("RATCHET_LEDGER_URL", self.ledger_url),
                ("RATCHET_ARTIFACT_URL", self.artifact_url),
            ) if value is not None
        }
        tracker = self.tracker().environment()
        return worker_environment(self.settings(), **{"PYTHONPATH": pythonpath, **stores, **tracker, **self.env})

    def tracker(self) -> TrackerSettings:
        """The example tracker's settings (its tools read them from the environment)."""
        return TrackerSettings(path=self.tracker_path, url=self.tracker_url)

    def settings(self, **overrides: object) -> Settings:
        """The same configuration as Settings, for in-process workers and direct activity calls."""
        values: dict[str, object] = dict(
            temporal_address=self.address, task_queue=self.task_queue, workspace_root=self.workspace_root,
            artifact_dir=self.artifact_dir, ledger_path=self.ledger_path,
            max_cached_workflows=self.cached_workflows, plugins=PLUGINS, codec_keys=None,
            ledger_url=self.ledger_url, artifact_url=self.artifact_url,
        )
        if self.host_id is not None:
            values["host_id"] = self.host_id
        values.update(self.overrides)
        values.update(overrides)
        return Settings(**values)

    def worker_command(self) -> list[str]:
        return [sys.executable, "-m", "ratchet.worker"]

    def worker(self, log: Path, ready_timeout: float = 60) -> WorkerProcess:
        """A `python -m ratchet.worker` process for this stack (not started), its output in `log`."""
        if self.code is not WORKING_TREE:
            return self.code.worker(self.worker_env(), log=log, ready_timeout=ready_timeout)
        return WorkerProcess(self.worker_command(), env=self.worker_env(), cwd=ROOT, log=log, ready_timeout=ready_timeout)


def rows(where: Path | TrackerSettings, table: str, prefix: str = "") -> list[tuple[str, str, str]]:
    """(idempotency_key, title/recipient, body) of a tracker table, keys starting with `prefix`:
    the SQLite file `where`, or the tracker `where` (its file or RATCHET_TRACKER_URL)."""
    settings = where if isinstance(where, TrackerSettings) else TrackerSettings(path=where, url=None)
    if settings.url is None and not settings.path.exists():
        return []
    exists = ("SELECT to_regclass(?) IS NOT NULL" if settings.url is not None
              else "SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = ?")
    column = "title" if table == "tickets" else "recipient"
    query = (f"SELECT idempotency_key, {column}, body FROM {table}"
             " WHERE substr(idempotency_key, 1, ?) = ? ORDER BY id")
    with open_tracker(settings) as conn:
        if not conn.execute(exists, (table,)).fetchone()[0]:
            return []
        return [tuple(row) for row in conn.execute(query, (len(prefix), prefix)).fetchall()]


def restarted_calls(ledger: Path | str) -> list[str]:
    """Ledger keys of tool calls and undos that started more than once: a worker died (or the
    attempt failed) after the call had begun, so the retry met a STARTED entry. `ledger`: the
    SQLite file, or a RATCHET_LEDGER_URL (sqlite:// or postgresql://)."""
    url = str(ledger) if isinstance(ledger, str) else None
    if url is not None and url.split(":", 1)[0].lower() in POSTGRES_SCHEMES:
        import psycopg

        with psycopg.connect(url, connect_timeout=10) as conn:
            found = conn.execute("SELECT key FROM ratchet_ledger WHERE starts > 1 ORDER BY started_at").fetchall()
    else:
        path = ledger_path(url) if url is not None else Path(ledger)
        if not path.exists():
            return []
        with sqlite3.connect(path, timeout=30) as conn:
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
    """Retry `fn` while the Temporal server is unreachable (a restart in progress): a raw SDK call's
    RPCError, `ratchet.client`'s Unavailable."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    delay = 0.2
    while True:
        try:
            return await fn()
        except (RPCError, Unavailable) as err:
            if asyncio.get_running_loop().time() > deadline:
                raise TimeoutError(f"{what}: the server stayed unavailable ({err})") from err
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)


def task_failures(history: WorkflowHistory) -> list[str]:
    """Messages of every WorkflowTaskFailed event: a run stuck retrying a task shows here."""
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
