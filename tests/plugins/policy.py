"""A `policy` profile for the approval policies' tests (tests/workflows/test_approval_policies.py):
every `write_file` and every `probe_pay` asks a person, unless a rule, a grant or an approved plan
spares it. `probe_pay` appends to probe.log, so tests count real payments outside Temporal."""

from __future__ import annotations

from pydantic import BaseModel

from ratchet.contracts import ApprovalRule, Budget
from ratchet.core.profiles import AgentProfile, register_profile
from ratchet.core.tools import ToolContext, tool

from .probe import PROBE_LOG


class PayArgs(BaseModel):
    amount: float
    to: str


@tool(effect="irreversible", timeout_s=5, max_attempts=3, workspace=True)
def probe_pay(ctx: ToolContext, args: PayArgs) -> str:
    """Pay an amount (irreversible: it asks a person unless a policy spares it)."""
    with open(ctx.workspace / PROBE_LOG, "a") as log:
        log.write(f"paid {args.amount:g} to {args.to}\n")
    return f"paid {args.amount:g} to {args.to}"


POLICY_RULES = [
    {"tool": "write_file", "when": {"path": {"glob": "docs/**"}}},
    {"tool": "probe_pay", "when": {"amount": {"lt": 100}}},
]

register_profile(
    AgentProfile(
        name="policy",
        system_prompt="You are a test agent whose calls ask a person unless a policy spares them.",
        tools=["write_file", "read_file", "probe_pay", "propose_plan"],
        budget=Budget(max_steps=30),
        approval_rules=[ApprovalRule(tool="write_file")],
        auto_approve=POLICY_RULES,
        approval_timeout_s=3 * 24 * 3600,
    )
)

register_profile(
    AgentProfile(
        name="policy_wait",
        system_prompt="You are a test agent whose calls ask a person unless a grant spares them.",
        tools=["write_file", "wait"],
        budget=Budget(max_steps=30),
        approval_rules=[ApprovalRule(tool="write_file")],
        approval_timeout_s=3 * 24 * 3600,
    )
)

register_profile(
    AgentProfile(
        name="policy_long",
        system_prompt="You are a test agent whose runs continue as new every few steps.",
        tools=["write_file"],
        budget=Budget(max_steps=30),
        approval_rules=[ApprovalRule(tool="write_file")],
        approval_timeout_s=3 * 24 * 3600,
        continue_as_new_events=60,
    )
)

register_profile(
    AgentProfile(
        name="policy_lax",
        system_prompt="You are a test agent whose approvals a timeout gives.",
        tools=["write_file", "propose_plan"],
        budget=Budget(max_steps=30),
        approval_rules=[ApprovalRule(tool="write_file")],
        approval_timeout_s=3600,
        on_approval_timeout="approve",
    )
)
