"""A worker in its own process, as operators run it: `python -m ratchet.worker`, settings from the environment."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from dataclasses import dataclass, field

from temporalio.api.enums.v1 import PendingActivityState
from temporalio.client import WorkflowHandle

from ratchet.ops.settings import Settings, worker_environment

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLUGINS = "tests.plugins.probe,tests.plugins.ops"


def worker_env(settings: Settings, **extra: str) -> dict[str, str]:
    """The environment of a test worker process: no workflow cache (every task replays), test plugins."""
    return worker_environment(
        settings.model_copy(update={"max_cached_workflows": 0, "plugins": PLUGINS}), **extra
    )


@dataclass
class WorkerProcess:
    proc: asyncio.subprocess.Process
    lines: list[str] = field(default_factory=list)
    reader: asyncio.Task | None = None

    async def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> int:
        """Send `sig` and wait for the exit code (SIGKILL after `timeout`)."""
        if self.proc.returncode is None:
            self.proc.send_signal(sig)
        try:
            return await asyncio.wait_for(self.proc.wait(), timeout)
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()
            raise
        finally:
            if self.reader is not None:
                await asyncio.wait({self.reader}, timeout=5)

    @property
    def output(self) -> str:
        return "".join(self.lines)


async def start_worker(settings: Settings, **env: str) -> WorkerProcess:
    """Start `python -m ratchet.worker` and wait until it is polling; its output is collected in `lines`."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "ratchet.worker", cwd=ROOT, env=worker_env(settings, **env),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )
    worker = WorkerProcess(proc)
    ready = asyncio.Event()

    async def read() -> None:
        assert proc.stdout is not None
        while line := await proc.stdout.readline():
            worker.lines.append(line.decode(errors="replace"))
            if b"ratchet worker ready" in line:
                ready.set()
        ready.set()

    worker.reader = asyncio.create_task(read())
    await asyncio.wait_for(ready.wait(), 30)
    assert proc.returncode is None and "ready" in worker.output, worker.output
    return worker


async def run_command(*argv: str, env: dict[str, str], timeout: float = 30) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        *argv, cwd=ROOT, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(proc.communicate(), timeout)
    return proc.returncode, out.decode(errors="replace")


async def wait_for_running_activity(handle: WorkflowHandle, activity_type: str, timeout: float = 20.0) -> None:
    """Wait until a worker has started an activity of this type (history records the start only
    when the activity ends, so ask for the pending activities)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        description = await handle.describe()
        for pending in description.raw_description.pending_activities:
            if pending.activity_type.name == activity_type and pending.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED:
                return
        assert asyncio.get_running_loop().time() < deadline, f"{activity_type} never started"
        await asyncio.sleep(0.1)
