"""What a run's programs may do: the `SandboxPolicy` a profile sets and `run_command` and the
verifier run under, and the `Sandbox` protocol every backend implements (ratchet/sandbox/,
docs/SECURITY.md).

It travels in the run's plan and in the inputs of the activities that run programs, so it holds
no secrets: environment variables are passed by *name*, their values read on the worker.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable

from pydantic import BaseModel, Field

MIB = 1024 * 1024


class SandboxPolicy(BaseModel):
    """Limits and permissions of one program run (and every process it starts).

    Limits a local backend enforces per process (rlimits) are marked so; the rest hold for the
    whole process tree. Byte limits are rounded up to whole MiB by the nsjail backend."""

    wall_time_s: float = Field(600.0, gt=0, le=24 * 3600)
    """Wall-clock limit of the call; the whole process tree is killed at it. A tool's own timeout
    (`run_command`'s `timeout_s`, the verifier's) can only shorten it."""
    cpu_s: int = Field(600, ge=1)
    """CPU seconds, per process (RLIMIT_CPU)."""
    memory_bytes: int = Field(4096 * MIB, ge=16 * MIB)
    """Address space, per process (RLIMIT_AS): virtual memory, so thread stacks and arenas count."""
    max_processes: int = Field(128, ge=2, le=65_536)
    """Processes and threads alive at once in the sandbox (RLIMIT_NPROC in its own user namespace)."""
    max_output_bytes: int = Field(MIB, ge=1024)
    """Output kept (stdout and stderr together): the first and last halves; the middle is dropped
    and counted. The program is not stopped for writing more."""
    max_file_bytes: int = Field(256 * MIB, ge=MIB)
    """Largest file a program may write (RLIMIT_FSIZE)."""
    disk_bytes: int = Field(1024 * MIB, ge=MIB)
    """Size of the private /tmp (a tmpfs), and the most the workspace may hold after the call:
    a bigger workspace fails the call. Not enforced *during* the call: see docs/SECURITY.md."""
    env: list[str] = Field(default_factory=list)
    """Variables passed from the worker's environment by name (if set there). Secret-bearing ones
    (ratchet/ops/secrets.py) are never passed. Every program also gets PATH, HOME (=/tmp), LANG,
    TMPDIR."""
    network: Literal["off", "on"] = "off"
    """`off`: a network namespace of its own with only a loopback (nothing of the worker's host,
    not even 127.0.0.1, is reachable). `on`: the host's network, every address: no backend here
    filters by host (docs/SECURITY.md)."""

    def within(self, timeout_s: float | None) -> SandboxPolicy:
        """This policy with the wall-time limit shortened to `timeout_s` (if shorter)."""
        if timeout_s is None or timeout_s >= self.wall_time_s:
            return self
        return self.model_copy(update={"wall_time_s": timeout_s})


@dataclass(frozen=True)
class SandboxResult:
    exit_code: int
    """The program's exit code; 128 + N when signal N killed it (as a shell reports it)."""
    output: str
    """stdout and stderr interleaved, at most `max_output_bytes` of it (plus a note of the cut)."""
    dropped_bytes: int = 0
    """Output bytes cut from the middle to keep within `max_output_bytes`."""


@runtime_checkable
class Sandbox(Protocol):
    """Runs one program in a workspace under a policy; async; safe to call concurrently.

    `run` returns when the program has exited and every process it started is gone (killed if
    need be), with the exit code and capped output. It raises `ProgramNotFound`, `WallTimeExceeded`
    (the whole tree killed), `DiskQuotaExceeded`, or `SandboxUnavailable` when the backend itself
    cannot work. Cancelling the call kills the tree too. `probe` checks, once at worker start,
    that the backend works here (it raises `SandboxUnavailable` saying why not)."""

    name: str

    def probe(self) -> None: ...

    async def run(self, argv: Sequence[str], workspace: Path, policy: SandboxPolicy) -> SandboxResult: ...
