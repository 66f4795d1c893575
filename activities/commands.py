"""Running a program without a shell, in the worker's sandbox (ratchet/sandbox/), with a timeout
and an output cap: the one path `run_command`, the verifier and user tools declared `runs_code` take.
RATCHET_SANDBOX=off is the `UnconfinedSandbox` backend here, not another path."""

from __future__ import annotations

import errno
from collections.abc import Sequence
from pathlib import Path

from temporalio.exceptions import ApplicationError

from ratchet.contracts import SandboxPolicy
from ratchet.core.tools import ToolError
from ratchet.sandbox import Sandbox, SandboxError, SandboxResult, SandboxUnavailable
from ratchet.sandbox.base import SANDBOX_UNAVAILABLE

OUTPUT_CAP = 16 * 1024
LAUNCH_ERRNOS = frozenset({errno.E2BIG, errno.ENAMETOOLONG, errno.ENOEXEC, errno.ELOOP, errno.ENOTDIR})
"""Errors starting a program that its argv caused (too long in all, a name too long, not a
program): the model's to see. Others (out of processes, of memory) stay transient."""


async def run_program(sandbox: Sandbox | None, argv: Sequence[str], cwd: Path, policy: SandboxPolicy) -> SandboxResult:
    """Run argv in the workspace `cwd` through `sandbox` under `policy`; `python` is this
    interpreter. A program that cannot run, or hits its wall time or the disk quota, is a
    `ToolError` (the model sees it), as is an argv the OS refuses to start (`LAUNCH_ERRNOS`); a
    worker without a working sandbox fails the call non-retryably (`SandboxUnavailable`): every
    retry would fail the same way."""
    if sandbox is None:
        raise ApplicationError(
            "no sandbox on this worker for programs: declare the tool runs_code=True",
            type=SANDBOX_UNAVAILABLE,
            non_retryable=True,
        )
    try:
        return await sandbox.run(argv, cwd, policy)
    except SandboxUnavailable as exc:
        raise ApplicationError(
            f"cannot run programs on this worker: {exc}", type=SANDBOX_UNAVAILABLE, non_retryable=True
        ) from None
    except SandboxError as exc:
        raise ToolError(str(exc)) from None
    except OSError as exc:
        if exc.errno not in LAUNCH_ERRNOS:
            raise
        program = argv[0] if len(argv[0]) <= 80 else f"{argv[0][:80]}... ({len(argv[0])} characters)"
        raise ToolError(f"cannot run {program!r}: {exc.strerror}") from None


def cap(text: str, limit: int = OUTPUT_CAP) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n... ({len(text) - limit} characters cut) ...\n{text[-half:]}"
