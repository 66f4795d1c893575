"""Running a program without a shell, with a timeout and an output cap."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path

from ratchet.core.tools import ToolError

OUTPUT_CAP = 16 * 1024
SECRET_VARIABLES = (
    "OPENAI_API_KEY", "TEMPORAL_API_KEY", "RATCHET_CODEC_KEYS", "AZURE_OPENAI_API_KEY",
    "RATCHET_LEDGER_URL", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "TEMPORAL_CONFIG_FILE",
)
SECRET_PREFIXES = ("TEMPORAL_TLS_", "TEMPORAL_GRPC_META_")


@dataclass
class Completed:
    exit_code: int
    output: str


async def run_program(argv: list[str], cwd: Path, timeout_s: float) -> Completed:
    """Run argv in cwd; `python` resolves to this interpreter's environment first."""
    env = child_environment()
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv, cwd=cwd, env=env, stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, start_new_session=True,
        )
    except (FileNotFoundError, PermissionError) as exc:
        raise ToolError(f"cannot run {argv[0]!r}: {exc.strerror}") from None
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), timeout=timeout_s)
    except (asyncio.TimeoutError, asyncio.CancelledError) as exc:
        _kill_group(proc)
        await proc.wait()
        if isinstance(exc, asyncio.CancelledError):
            raise
        raise ToolError(f"{argv[0]} timed out after {timeout_s}s") from None
    return Completed(exit_code=proc.returncode or 0, output=out.decode(errors="replace"))


def child_environment() -> dict[str, str]:
    """The worker's environment minus its credentials: a program the model runs (`env`,
    `printenv`) must not be able to read the model key, the Temporal key or its config file, the
    codec keys, the ledger's database password or the object store's secret key."""
    return {
        name: value for name, value in os.environ.items()
        if name not in SECRET_VARIABLES and not name.startswith(SECRET_PREFIXES)
    }


def cap(text: str, limit: int = OUTPUT_CAP) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n... ({len(text) - limit} characters cut) ...\n{text[-half:]}"


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
