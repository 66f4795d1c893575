"""Test-only tools and a `probe` profile, loaded by workers through RATCHET_PLUGINS.

Each tool appends a line to probe.log in the run's workspace, so tests count real executions
outside Temporal.
"""

from __future__ import annotations

import asyncio

from pydantic import BaseModel

from ratchet.contracts import Budget
from ratchet.profiles import AgentProfile, register_profile
from ratchet.tools import ToolContext, tool

PROBE_LOG = "probe.log"


class AppendArgs(BaseModel):
    label: str
    fail_first: bool = False
    sleep_s: float = 0.0


def _append(ctx: ToolContext, line: str) -> None:
    with open(ctx.workspace / PROBE_LOG, "a") as log:
        log.write(line + "\n")


@tool(effect="compensable", timeout_s=3, max_attempts=20, idempotent=True)
async def probe_append(ctx: ToolContext, args: AppendArgs) -> str:
    """Append a label to probe.log (optionally after a pause, or failing its first attempt)."""
    _append(ctx, f"attempt {ctx.attempt} {ctx.key}")
    if args.fail_first and ctx.attempt == 1:
        raise RuntimeError("transient failure on the first attempt")
    if args.sleep_s:
        await asyncio.sleep(args.sleep_s)
    _append(ctx, f"done {ctx.key} {args.label}")
    return f"appended {args.label}"


register_profile(
    AgentProfile(
        name="probe",
        system_prompt="You are a test agent.",
        tools=["probe_append", "write_file", "read_file", "list_files"],
        budget=Budget(max_steps=50),
    )
)
