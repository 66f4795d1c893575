"""Bench tools and profiles, loaded by bench workers through RATCHET_PLUGINS=bench.plugin.

`bench_echo` is the fast read-only tool of the step-cost runs (the floor's tool does the same);
`bench_note` is its side-effecting twin (through the idempotency ledger, with an undo), used to
price the ledger and verification.
"""

from __future__ import annotations

from pydantic import BaseModel

from ratchet.contracts import ApprovalRule, Budget, FailurePolicy, Guardrail, Verifier
from ratchet.core.profiles import CODER, AgentProfile, register_profile
from ratchet.core.tools import FatalToolError, ToolContext, tool, undo_for
from ratchet.mcp.config import McpToolset

BIG_BUDGET = Budget(max_steps=100_000, max_tokens=10**10)  # the most a run may have (BudgetOverride)
NO_CONTINUE_AS_NEW = 10**9


class EchoArgs(BaseModel):
    text: str


@tool(effect="read_only", timeout_s=5)
async def bench_echo(ctx: ToolContext, args: EchoArgs) -> str:
    """Return the text (a fast read-only tool)."""
    return f"echo {args.text}"


@tool(effect="compensable", timeout_s=5, idempotent=True)
async def bench_note(ctx: ToolContext, args: EchoArgs) -> str:
    """Pretend to write a note (a fast side-effecting tool: ledger, effect record, undo)."""
    ctx.record_undo({"text": args.text})
    return f"noted {args.text}"


@undo_for("bench_note")
async def undo_bench_note(ctx: ToolContext, args: EchoArgs, undo: dict | None) -> str:
    return "unnoted"


def _profile(name: str, **extra) -> AgentProfile:
    base = dict(
        system_prompt="You are a benchmark agent.",
        tools=["bench_echo", "bench_note", "wait"],
        budget=BIG_BUDGET,
        failure_policy=FailurePolicy.KEEP,
    )
    return register_profile(AgentProfile(name=name, **{**base, **extra}))


_profile("bench")
"""Step cost and scale: continue-as-new at Ratchet's default bound (never reached at N <= 50)."""
_profile(
    "bench_guarded",
    guardrails=[
        Guardrail(name="in-drop", on="input", patterns=[r"(?i)drop\s+table"]),
        Guardrail(name="call-rm", on="tool_call", patterns=[r"rm\s+-rf\s+/"]),
        Guardrail(name="call-force", on="tool_call", tool="bench_echo", patterns=[r"--force\b"], action="ask"),
        Guardrail(name="out-confidential", on="answer", patterns=[r"\bCONFIDENTIAL\b"]),
        Guardrail(name="out-key", on="answer", patterns=[r"\bAKIA[0-9A-Z]{16}\b"], action="redact"),
    ],
)
"""The `bench` profile with five pattern guardrails that never match: what checking them costs a step."""
_profile("bench_verify", verifier=Verifier(argv=["true"], timeout_s=30))
"""Every step with bench_note is verified and checkpointed (`true` as the verifier)."""
_profile("bench_long", continue_as_new_events=400, context_messages=200)
"""Long runs: continue-as-new every ~400 events, as the `approver` test profile; the model sees
the latest 200 messages (a run this long outgrows any real context window)."""
_profile("bench_replay", continue_as_new_events=NO_CONTINUE_AS_NEW)
"""One long history to replay (the bench server's suggested-continue-as-new limit is raised)."""
_profile("bench_sandbox", tools=["run_command"], allow_irreversible=["run_command"])
"""Every step runs a program in the worker's sandbox (bench/sandbox.py)."""
register_profile(CODER.model_copy(update={"name": "bench_coder", "budget": BIG_BUDGET}))
"""The coder profile as shipped (its file tools, `python -m unittest` as its verifier), with the bench's budget."""
register_profile(CODER.model_copy(update={"name": "bench_coder_write", "budget": BIG_BUDGET, "verifier": None}))
"""The same tools without a verifier: the cost of a write_file step itself (verification is priced by `verify`)."""
_profile("bench_mcp", tools=["bench_echo"], mcp=[McpToolset(server="lean"), McpToolset(server="sdk")])
"""`bench_echo` beside its MCP twins `lean__echo` and `sdk__echo` (bench/mcp_calls.py; the worker's
RATCHET_MCP_SERVERS names the servers)."""


class ReleaseArgs(BaseModel):
    broken_on: list[str] = []


@tool(effect="read_only", timeout_s=5)
async def bench_release(ctx: ToolContext, args: ReleaseArgs) -> str:
    """A bad release, for the deploy guard's section (bench/guard.py): fails the run (non-retryable)
    on a worker whose build is in `broken_on`, passes on any other."""
    build = ctx.settings.build_id if ctx.settings is not None else None
    if build in args.broken_on:
        raise FatalToolError(f"release check failed on build {build}")
    return f"release check passed on build {build}"


_profile("bench_release", tools=["bench_release"])
_profile("bench_approval", approval_rules=[ApprovalRule(tool="bench_echo")])
"""Every bench_echo waits for a person's approval (bench/approvals.py: signed against unsigned)."""
