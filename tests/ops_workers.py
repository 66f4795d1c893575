"""A worker in its own process, as operators run it: `python -m ratchet.worker`, settings from the environment."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from devtools.workers import WorkerProcess
from ratchet.activities.tracker_tools import TrackerSettings
from ratchet.ops.settings import Settings, worker_environment

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLUGINS = "tests.plugins.probe,tests.plugins.ops"


def worker_env(settings: Settings, **extra: str) -> dict[str, str]:
    """The environment of a test worker process: no workflow cache (every task replays), test plugins."""
    tracker = TrackerSettings().environment()  # the example tracker's own settings, as the test set them
    return worker_environment(
        settings.model_copy(update={"max_cached_workflows": 0, "plugins": PLUGINS}), **{**tracker, **extra}
    )


async def start_worker(settings: Settings, **env: str) -> WorkerProcess:
    """Start `python -m ratchet.worker` and wait until it is polling; its output is collected in `lines`."""
    command = [sys.executable, "-m", "ratchet.worker"]
    return await WorkerProcess(command, env=worker_env(settings, **env), cwd=ROOT).start(timeout=30)


async def run_command(
    *argv: str | Path, env: dict[str, str] | None = None, cwd: str | Path = ROOT, timeout: float = 30,
) -> tuple[int, str]:
    """Run a command to its end: (exit code, stdout and stderr together). Killed after `timeout`."""
    proc = await asyncio.create_subprocess_exec(
        *map(str, argv), cwd=cwd, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    return proc.returncode, out.decode(errors="replace")

