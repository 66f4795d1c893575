"""A worker in a child process, started and waited for until it prints its ready line.

The one way the tests, the chaos tooling and the bench start worker processes:

    worker = await WorkerProcess([sys.executable, "-m", "ratchet.worker"], env=env, cwd=ROOT).start()
    ...
    code = await worker.stop()            # SIGTERM, the exit code (SIGKILL and TimeoutError if it hangs)

The process gets its own session (process group), so `kill()` takes any children with it. Its
stdout and stderr go together either to memory (`lines`, `output`) or, with `log=`, appended to a
file (`output` is then what this process wrote there).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Self

READY = "ratchet worker ready"
"""What `python -m ratchet.worker` (and `ratchet worker`) prints once it is polling."""


class WorkerProcess:
    """One worker process: `argv` run in `cwd` with `env`; ready once a line of its output contains `ready`."""

    def __init__(
        self, argv: Sequence[str | os.PathLike[str]], *, env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None, log: Path | None = None, ready: str = READY,
        ready_timeout: float = 60, name: str = "worker",
    ) -> None:
        self.argv = [str(a) for a in argv]
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self.log = Path(log) if log is not None else None
        self.ready = ready
        self.ready_timeout = ready_timeout
        self.name = name
        self.proc: subprocess.Popen[bytes] | None = None
        self._lines: list[str] = []
        self._log_offset = 0
        self._reader: threading.Thread | None = None
        self._ready_line: str | None = None

    # -- starting ---------------------------------------------------------------------------------

    async def start(self, timeout: float | None = None) -> Self:
        """Start the process and wait for its ready line. Raises RuntimeError if it exits first and
        TimeoutError (after SIGKILL) if it is not ready within `timeout` (default `ready_timeout`);
        both messages end with the tail of its output."""
        self._launch()
        assert self.proc is not None
        timeout = self.ready_timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        while self.ready_line is None:
            if self.proc.poll() is not None:
                self._join_reader()
                raise RuntimeError(
                    f"{self.name} exited with {self.proc.returncode} before it was ready{self._where()}\n{self.tail()}"
                )
            if time.monotonic() > deadline:
                self.kill()
                raise TimeoutError(f"{self.name} not ready after {timeout}s{self._where()}\n{self.tail()}")
            await asyncio.sleep(0.05)
        return self

    def _launch(self) -> None:
        if self.proc is not None:
            raise RuntimeError(f"{self.name} was started already (pid {self.proc.pid})")
        popen = dict(cwd=self.cwd, env=self.env, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                     start_new_session=True)
        if self.log is None:
            self.proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE, **popen)
            assert self.proc.stdout is not None
            self._reader = threading.Thread(target=self._read, args=(self.proc.stdout,), daemon=True,
                                            name=f"{self.name} output")
            self._reader.start()
        else:
            self.log.parent.mkdir(parents=True, exist_ok=True)
            with open(self.log, "ab") as out:
                self._log_offset = out.tell()
                self.proc = subprocess.Popen(self.argv, stdout=out, **popen)

    def _read(self, stream: IO[bytes]) -> None:
        with stream:
            for raw in iter(stream.readline, b""):
                self._lines.append(raw.decode(errors="replace"))

    def _join_reader(self, timeout: float = 5) -> None:
        if self._reader is not None:
            self._reader.join(timeout)

    def _where(self) -> str:
        return f"; see {self.log}" if self.log is not None else ""

    # -- output -----------------------------------------------------------------------------------

    @property
    def lines(self) -> list[str]:
        """Its output so far, line by line (each with its newline, but maybe the last)."""
        if self.log is None:
            return self._lines
        return self.output.splitlines(keepends=True)

    @property
    def output(self) -> str:
        if self.log is None:
            return "".join(self._lines)
        if not self.log.exists():
            return ""
        with open(self.log, "rb") as f:
            f.seek(self._log_offset)
            return f.read().decode(errors="replace")

    @property
    def ready_line(self) -> str | None:
        """The first whole line of output with the ready text, once there is one."""
        if self._ready_line is None:
            self._ready_line = next(
                (line for line in self.lines if self.ready in line and line.endswith("\n")), None
            )
        return self._ready_line

    def tail(self, n: int = 20) -> str:
        return "".join(self.lines[-n:])

    # -- state and stopping -----------------------------------------------------------------------

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    @property
    def returncode(self) -> int | None:
        return self.proc.poll() if self.proc is not None else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL its process group: no shutdown, no flushing, no completions reported."""
        if self.alive():
            assert self.proc is not None
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()
        self._join_reader()

    async def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> int:
        """Send `sig` and wait for the exit code; after `timeout`, SIGKILL and raise TimeoutError."""
        if self.proc is None:
            raise RuntimeError(f"{self.name} was never started")
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None:
            if time.monotonic() > deadline:
                self.kill()
                raise TimeoutError(
                    f"{self.name} still running {timeout}s after {signal.Signals(sig).name}{self._where()}\n{self.tail()}"
                )
            await asyncio.sleep(0.05)
        self._join_reader()
        return self.proc.returncode

    async def terminate(self, timeout: float = 15) -> int | None:
        """SIGTERM (graceful), then SIGKILL if it does not exit in time: its exit code (None if never started)."""
        if self.proc is None:
            return None
        try:
            return await self.stop(signal.SIGTERM, timeout)
        except TimeoutError:
            return self.proc.returncode

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.terminate()


def stop_worker(proc: subprocess.Popen | None, timeout_s: float = 20) -> None:
    """SIGTERM a worker process (it drains, then exits), SIGKILL it after `timeout_s`."""
    if proc is None:
        return
    proc.terminate()
    try:
        proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
