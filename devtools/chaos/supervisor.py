"""A supervisor that SIGKILLs the worker at random moments and starts a new one.

A SIGKILL gives the worker no chance to finish or report anything: tasks and activities it held
are lost in flight, and Temporal hands them to the next worker after their timeouts.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass, field
from pathlib import Path

from devtools.chaos.stack import Stack
from devtools.workers import WorkerProcess


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
            candidate = self.stack.worker(self.log_dir / f"worker-{self.starts}.log")
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
