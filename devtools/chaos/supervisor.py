"""Worker processes, and a supervisor that SIGKILLs the worker at random moments and starts a new one.

A SIGKILL gives the worker no chance to finish or report anything: tasks and activities it held
are lost in flight, and Temporal hands them to the next worker after their timeouts.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from devtools.chaos.stack import ROOT, Stack

READY = b"ratchet worker ready"


class WorkerProcess:
    """One `python -m ratchet.worker` process, its output in its own log file."""

    def __init__(self, stack: Stack, log_path: Path) -> None:
        self.stack = stack
        self.log_path = log_path
        self.proc: subprocess.Popen | None = None

    async def start(self, timeout_s: float = 60) -> WorkerProcess:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                self.stack.worker_command(), cwd=ROOT, env=self.stack.worker_env(),
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
            )
        deadline = time.monotonic() + timeout_s
        while READY not in self.log_path.read_bytes():
            if self.proc.poll() is not None:
                code = self.proc.returncode
                raise RuntimeError(f"worker exited with {code} before it was ready; see {self.log_path}")
            if time.monotonic() > deadline:
                self.kill()
                raise TimeoutError(f"worker not ready after {timeout_s}s; see {self.log_path}")
            await asyncio.sleep(0.05)
        return self

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL: no shutdown, no flushing, no completions reported."""
        if self.alive():
            assert self.proc is not None
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    async def terminate(self, timeout_s: float = 15) -> int | None:
        """SIGTERM (graceful), then SIGKILL if it does not exit in time."""
        if not self.alive():
            return self.proc.returncode if self.proc else None
        assert self.proc is not None
        self.proc.terminate()
        deadline = time.monotonic() + timeout_s
        while self.proc.poll() is None and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        self.kill()
        return self.proc.returncode


@dataclass
class Supervisor:
    """Keeps one worker running; while `chaos()` runs, kills it every `kill_every` seconds (a
    uniform random pause, measured from the moment the worker is ready) and starts another."""

    stack: Stack
    log_dir: Path
    kill_every: tuple[float, float] = (4.0, 15.0)
    rng: random.Random = field(default_factory=random.Random)
    max_kills: int | None = None
    kills: int = 0
    starts: int = 0
    unexpected_exits: int = 0
    kill_times: list[float] = field(default_factory=list)
    worker: WorkerProcess | None = None

    async def ensure_worker(self) -> WorkerProcess:
        """A ready worker: the current one, or a new one (retried while the server is down)."""
        if self.worker is not None and self.worker.alive():
            return self.worker
        if self.worker is not None:
            self.unexpected_exits += 1
        while True:
            self.starts += 1
            candidate = WorkerProcess(self.stack, self.log_dir / f"worker-{self.starts}.log")
            try:
                self.worker = await candidate.start()
                return self.worker
            except RuntimeError:  # e.g. it could not connect during a server restart
                await asyncio.sleep(1.0)

    async def chaos(self, stop: asyncio.Event) -> None:
        """Kill and replace the worker at random moments until `stop` is set."""
        started = time.monotonic()
        while not stop.is_set():
            worker = await self.ensure_worker()
            if self.max_kills is not None and self.kills >= self.max_kills:
                await stop.wait()
                return
            kill_at = time.monotonic() + self.rng.uniform(*self.kill_every)
            while time.monotonic() < kill_at and worker.alive() and not stop.is_set():
                try:
                    await asyncio.wait_for(stop.wait(), timeout=min(0.5, max(0.0, kill_at - time.monotonic())))
                except asyncio.TimeoutError:
                    pass
            if stop.is_set():
                return
            if worker.alive():
                worker.kill()
                self.worker = None
                self.kills += 1
                self.kill_times.append(round(time.monotonic() - started, 1))

    async def shutdown(self) -> None:
        if self.worker is not None:
            await self.worker.terminate()
