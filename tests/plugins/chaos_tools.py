"""Test-only tools and profiles for the chaos runs, the hostile-input catalogue and the saga sweep
(ratchet/chaos), loaded by workers through RATCHET_PLUGINS=tests.plugins.chaos_tools.

`outbox_send` is the side effect that can show a duplicate: its outbox table (in the tracker's
database: the SQLite file, or the Postgres of RATCHET_TRACKER_URL) has no UNIQUE constraint, so only the ledger and the tool's reconcile hook stand
between a retried call and a second row. It can linger after writing (a wider window for a
SIGKILL between the side effect and the ledger's COMPLETED record) and can fail fatally after
writing (a failed call that still took effect, whose undo must still run).
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from pydantic import BaseModel, Field

from ratchet.activities.tracker_tools import open_tracker, sqlite_tracker
from ratchet.contracts import ApprovalRule, Budget, FailurePolicy, Verifier
from ratchet.core.profiles import AgentProfile, register_profile
from ratchet.core.tools import FatalToolError, ToolContext, ToolOutput, reconcile_for, tool, undo_for

BROKEN = "BROKEN"
"""A non-empty BROKEN file in the workspace makes the chaos/sweep verifier fail (no checkpoint)."""
VERIFIER = Verifier(argv=["test", "!", "-s", BROKEN], timeout_s=2)
"""`test` answers at once; a short timeout keeps a verification lost with a killed worker short
(the workflow allows timeout_s + 60 s before it retries on another worker)."""


OUTBOX = (
    "CREATE TABLE IF NOT EXISTS outbox ({id},"
    " idempotency_key TEXT NOT NULL, recipient TEXT NOT NULL, body TEXT NOT NULL)"
)


def connect_outbox(path: Path) -> sqlite3.Connection:
    """The outbox in the SQLite tracker file at `path`."""
    return sqlite_tracker(path, OUTBOX)


class SendArgs(BaseModel):
    to: str = Field(min_length=1, max_length=200)
    body: str = Field("", max_length=10_000)
    linger_s: float = Field(0.0, ge=0, le=5, description="Pause after sending, before reporting.")
    fatal_after_send: bool = Field(False, description="Send, then fail the run (non-retryable).")


def _sent(message_id: int, to: str) -> ToolOutput:
    return ToolOutput(output=f"queued message #{message_id} to {to}", undo={"message_id": message_id})


@tool(effect="compensable", timeout_s=5, max_attempts=20)
async def outbox_send(ctx: ToolContext, args: SendArgs) -> ToolOutput:
    """Queue a message in the outbox (the outbox itself does not deduplicate)."""
    with open_tracker(None, OUTBOX) as conn:
        (message_id,) = conn.execute(
            "INSERT INTO outbox (idempotency_key, recipient, body) VALUES (?, ?, ?) RETURNING id",
            (ctx.key, args.to, args.body),
        ).fetchone()
    if args.linger_s:
        await asyncio.sleep(args.linger_s)
    if args.fatal_after_send:
        raise FatalToolError(f"message #{message_id} was queued, then the relay refused this run")
    return _sent(message_id, args.to)


@reconcile_for("outbox_send")
def reconcile_outbox_send(ctx: ToolContext, args: SendArgs) -> ToolOutput | None:
    with open_tracker(None, OUTBOX) as conn:
        row = conn.execute("SELECT id FROM outbox WHERE idempotency_key = ? ORDER BY id", (ctx.key,)).fetchone()
    return _sent(row[0], args.to) if row else None


@undo_for("outbox_send")
def undo_outbox_send(ctx: ToolContext, args: SendArgs, undo: dict | None) -> str:
    """Withdraw the message (by the call's key: safe when the call never reported, or did nothing)."""
    forward_key = ctx.key.removesuffix("/undo")
    with open_tracker(None, OUTBOX) as conn:
        deleted = conn.execute("DELETE FROM outbox WHERE idempotency_key = ?", (forward_key,)).rowcount
    return f"withdrew {deleted} message(s)"


class FailArgs(BaseModel):
    reason: str


@tool(effect="read_only", timeout_s=5)
def chaos_fail(ctx: ToolContext, args: FailArgs) -> str:
    """Fail the run on purpose (non-retryable): its failure policy applies."""
    raise FatalToolError(args.reason)


class WaitArgs(BaseModel):
    seconds: float = Field(ge=0, le=60)
    release: str = ""
    """A file whose appearance ends the wait early (a test's "go on" without a race on the clock)."""


@tool(effect="read_only", timeout_s=70, heartbeat_s=2)
async def chaos_wait(ctx: ToolContext, args: WaitArgs) -> str:
    """Pause inside a step (time for a test to send updates and signals); heartbeats, so a
    cancelled run stops it at once instead of leaving it to hold a worker's shutdown."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + args.seconds
    while loop.time() < deadline and not (args.release and Path(args.release).exists()):
        ctx.heartbeat()
        await asyncio.sleep(min(0.5, max(0.0, deadline - loop.time())))
    return f"waited {args.seconds}s"


CHAOS_TOOLS = ["write_file", "read_file", "create_ticket", "outbox_send", "chaos_fail"]

register_profile(
    AgentProfile(
        name="chaos",
        system_prompt="You are a test agent with side effects outside Temporal.",
        tools=CHAOS_TOOLS,
        budget=Budget(max_steps=40),
        max_bad_tool_calls=1000,  # model-fault runs receive malformed tool JSON on purpose
        verifier=VERIFIER,
        failure_policy=FailurePolicy.ROLLBACK_TO_LAST_CHECKPOINT,
    )
)

register_profile(
    AgentProfile(
        name="chaos_quick",
        system_prompt="You are a test agent with side effects outside Temporal.",
        tools=CHAOS_TOOLS,
        budget=Budget(max_steps=40),
        max_bad_tool_calls=1000,
        failure_policy=FailurePolicy.ROLLBACK_TO_LAST_CHECKPOINT,  # no verifier: no checkpoints, all undone
    )
)

register_profile(
    AgentProfile(
        name="chaos_hosts",
        system_prompt="You are a test agent with side effects outside Temporal, on several hosts.",
        tools=CHAOS_TOOLS,
        budget=Budget(max_steps=40),
        verifier=VERIFIER,
        failure_policy=FailurePolicy.ROLLBACK_TO_LAST_CHECKPOINT,
        host_timeout_s=5,  # a killed host's runs fail over 5 s after their next workspace call
    )
)

register_profile(
    AgentProfile(
        name="hostile",
        system_prompt="You are a test agent; the model's tool calls are hostile.",
        tools=["read_file", "write_file", "list_files", "run_command", "chaos_wait"],
        budget=Budget(max_steps=20),
        max_bad_tool_calls=50,
        allow_irreversible=["run_command"],
        failure_policy=FailurePolicy.KEEP,
    )
)

register_profile(
    AgentProfile(
        name="hostile_policy",
        system_prompt="You are a test agent; the model tries to get its own calls approved.",
        tools=["write_file", "run_command", "propose_plan"],
        budget=Budget(max_steps=20),
        max_bad_tool_calls=50,
        approval_rules=[ApprovalRule(tool="write_file")],
        auto_approve=[
            {"tool": "write_file", "when": {"path": {"glob": "docs/**"}}},
            {"tool": "run_command", "when": {"argv": {"regex": "pytest( -q)?"}}},
        ],
        approval_timeout_s=600,
        failure_policy=FailurePolicy.KEEP,
    )
)
