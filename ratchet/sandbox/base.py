"""The sandbox errors, the backend of a worker without a working sandbox, and the process
supervision the local backends share: capped output, the wall-time limit, killing what is left.
(The `Sandbox` protocol and its result are contracts: ratchet/contracts/sandbox.py.)"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from ratchet.contracts.sandbox import SandboxPolicy, SandboxResult

SANDBOX_UNAVAILABLE = "SandboxUnavailable"
"""The error type (Temporal `ApplicationError.type`) of a program that could not run because the
worker has no working sandbox."""
DRAIN_S = 1.0
"""After the program exits, how long its output may take to end (a leftover process holding the
pipe open is not waited for longer)."""


class SandboxError(Exception):
    """The program could not run or was stopped; the message is for the model (a `ToolError`)."""


class SandboxUnavailable(SandboxError):
    """The backend cannot run anything on this host (no binary, no user namespaces, a bad set-up):
    not the program's fault, and every later call would fail the same way."""


class ProgramNotFound(SandboxError):
    """argv[0] is not a program the sandbox can run."""


class WallTimeExceeded(SandboxError):
    """The call hit its wall-time limit; every process it started was killed."""


class DiskQuotaExceeded(SandboxError):
    """After the call, the workspace held more than the policy's `disk_bytes`."""


class UnavailableSandbox:
    """What a worker holds when its backend failed the probe: every call refuses, saying why."""

    name = "unavailable"

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def probe(self) -> None:
        raise SandboxUnavailable(self.reason)

    async def run(self, argv: Sequence[str], workspace: Path, policy: SandboxPolicy) -> SandboxResult:
        raise SandboxUnavailable(self.reason)


class Capture:
    """Output kept within a byte limit: the first half, and a rolling last half."""

    def __init__(self, limit: int) -> None:
        self.head_limit = limit // 2
        self.tail_limit = limit - self.head_limit
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0

    def add(self, chunk: bytes) -> None:
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        self.tail += chunk
        over = len(self.tail) - self.tail_limit
        if over > 0:
            del self.tail[:over]
            self.dropped += over

    def text(self) -> str:
        if not self.dropped:
            return (self.head + self.tail).decode(errors="replace")
        cut = f"\n... ({self.dropped} bytes of output dropped) ...\n"
        return self.head.decode(errors="replace") + cut + self.tail.decode(errors="replace")


@dataclass(frozen=True)
class Launch:
    """One supervised process: the command, its environment and working directory."""

    command: Sequence[str]
    env: Mapping[str, str]
    cwd: Path
    pass_fds: Sequence[int] = ()


async def supervise(launch: Launch, policy: SandboxPolicy, shown: str) -> tuple[int, Capture]:
    """Run `launch` in a session of its own, collect its output within the policy's cap, kill its
    process group at the wall-time limit (raising `WallTimeExceeded`, `shown` naming the program)
    or on cancellation, and after it exits (stragglers still in the group). The output pipe is ours,
    not asyncio's: a process that escaped the group and holds it cannot delay the exit."""
    read_end, write_end = os.pipe()
    try:
        proc = await asyncio.create_subprocess_exec(
            *launch.command,
            cwd=launch.cwd,
            env=dict(launch.env),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=write_end,
            stderr=write_end,
            start_new_session=True,
            pass_fds=tuple(launch.pass_fds),
        )
    except (FileNotFoundError, PermissionError) as exc:
        os.close(read_end)
        raise ProgramNotFound(f"cannot run {shown!r}: {exc.strerror}") from None
    finally:
        os.close(write_end)
    capture = Capture(policy.max_output_bytes)
    pipe = os.fdopen(read_end, "rb", 0)
    reader = asyncio.create_task(_read(pipe, capture))
    try:
        await asyncio.wait_for(proc.wait(), timeout=policy.wall_time_s)
    except (TimeoutError, asyncio.CancelledError) as exc:
        _kill_group(proc.pid)
        await proc.wait()
        reader.cancel()
        await asyncio.gather(reader, return_exceptions=True)
        pipe.close()
        if isinstance(exc, asyncio.CancelledError):
            raise
        raise WallTimeExceeded(
            f"{shown} timed out after {policy.wall_time_s:g}s; every process it started was killed"
        ) from None
    _kill_group(proc.pid)
    try:
        await asyncio.wait_for(reader, timeout=DRAIN_S)
    except TimeoutError:
        pass  # a process outside the group still holds the pipe: its output is not waited for
    return exit_status(proc.returncode), capture


async def _read(pipe: BinaryIO, capture: Capture) -> None:
    loop = asyncio.get_running_loop()
    stream = asyncio.StreamReader()
    transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stream), pipe)
    try:
        while chunk := await stream.read(64 * 1024):
            capture.add(chunk)
    finally:
        transport.close()


def exit_status(returncode: int | None) -> int:
    """A subprocess return code as a shell shows it: 128 + N for a death by signal N."""
    if returncode is None:
        return 0
    return 128 - returncode if returncode < 0 else returncode


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
