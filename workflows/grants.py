"""Policies instead of clicks (deterministic, no I/O): a profile's auto-approve rules and the
grants people gave in this run, checked before a call asks anyone; the grant an approval carries;
the `propose_plan` tool, whose approval grants its envelope (ratchet/contracts/approval_policy.py).

Every automatic approval is a `Decision` in `state.calls.decisions` like a person's, its `by`
naming what made it: `rule:write_file path=docs/**` or `grant:<id>`. A grant lives in the state
(`state.calls.grants`), so continue-as-new carries it; it ends at its `expires_at`, workflow time.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from pydantic import ValidationError
from temporalio import workflow

from ratchet.contracts import (
    AgentState,
    ApproveRequest,
    Decision,
    ErrorType,
    Grant,
    GrantRequest,
    PlanArgs,
    RunPlan,
    ToolPattern,
    ToolResult,
    ToolSpec,
)
from ratchet.contracts.base import BY_GRANT, BY_RULE, BY_TIMEOUT
from ratchet.core import approval_rules
from . import approvals
from .phases import Phases

PLAN_TOOL = "propose_plan"


def automatic(state: AgentState, plan: RunPlan, tool: str, args: dict[str, Any], now: datetime) -> Decision | None:
    """The decision a rule or a grant in force makes for this call, or None (a person decides)."""
    rule = approval_rules.first_covering(plan.auto_approve, tool, args)
    if rule is not None:
        by = BY_RULE + rule.label()
        return Decision(approved=True, reason=f"profile rule {rule.label()}", by=by, at=now.isoformat())
    for grant in in_force(state, now):
        pattern = approval_rules.first_covering(grant.patterns, tool, args)
        if pattern is not None:
            reason = f"grant {grant.id} by {grant.by} ({pattern.label()}) until {grant.expires_at}"
            return Decision(approved=True, reason=reason, by=BY_GRANT + grant.id, at=now.isoformat())
    return None


async def approval(
    state: AgentState,
    plan: RunPlan,
    spec: ToolSpec,
    call_id: str,
    args: dict[str, Any],
    tripped: str | None,
    phases: Phases,
) -> ToolResult | None:
    """None once the call may run: it needs no approval, a profile rule or a grant approves it
    (not a guardrail's `ask`: that one always asks), or a person does; else the rejection."""
    reason = tripped or approvals.needs_approval(plan, spec, args)
    if reason is None:
        return None
    auto = None if tripped else automatic(state, plan, spec.name, args, workflow.now())
    if auto is not None:
        state.calls.decide(call_id, auto)
        return None
    decision = await approvals.wait_for(state, plan, spec, call_id, args, reason, phases)
    return None if decision.approved else rejected(decision)


def in_force(state: AgentState, now: datetime) -> list[Grant]:
    return [g for g in state.calls.grants if datetime.fromisoformat(g.expires_at) > now]


def give(state: AgentState, request: GrantRequest, tool: str, by: str, source: str, now: datetime) -> Grant:
    """A person's grant, in force from `now` for `request.for_s` (no patterns: every call of `tool`)."""
    grant = Grant(
        id=f"g{len(state.calls.grants) + 1}",
        patterns=request.patterns or [ToolPattern(tool=tool)],
        expires_at=(now + timedelta(seconds=request.for_s)).isoformat(),
        by=by,
        granted_at=now.isoformat(),
        source=source,
    )
    state.calls.grant(grant)
    return grant


def with_approval(state: AgentState, request: ApproveRequest, now: datetime) -> str:
    """The grant an approval carries, given (the `approve` update's answer's tail), or ""."""
    if request.grant is None:
        return ""
    tool = next(p.tool for p in state.calls.pending_approvals if p.call_id == request.call_id)
    grant = give(state, request.grant, tool, request.by, request.call_id, now)
    return f"; granted {grant.id} ({'; '.join(p.label() for p in grant.patterns)}) until {grant.expires_at}"


def plan_request(args: dict[str, Any]) -> tuple[PlanArgs | None, str | None]:
    """The `propose_plan` call's plan, or what the model got wrong."""
    try:
        return PlanArgs.model_validate(args), None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        return None, f"invalid plan: {where}: {first['msg']}"


async def propose(
    state: AgentState, plan: RunPlan, spec: ToolSpec, call_id: str, args: dict[str, Any], phases: Phases
) -> ToolResult:
    """`propose_plan`: a person (never a rule, a grant or the approval timeout, whatever the
    profile's `on_approval_timeout`) approves its envelope as one grant."""
    request, problem = plan_request(args)
    if request is None:
        return ToolResult(ok=False, output=problem or "", error_type=ErrorType.INVALID_ARGUMENTS)
    envelope = "; ".join(p.label() for p in request.calls)
    reason = f"plan for {request.for_s:g}s: {request.summary} [envelope: {envelope}]"
    decision = await approvals.wait_for(state, plan, spec, call_id, args, reason, phases)
    if decision.by == BY_TIMEOUT:  # an envelope is a person's to approve: never the timeout's
        return ToolResult(ok=False, error_type=ErrorType.REJECTED, output="no person approved the plan in time")
    if not decision.approved:
        return rejected(decision)
    grant = give(
        state,
        GrantRequest(for_s=request.for_s, patterns=request.calls),
        PLAN_TOOL,
        decision.by,
        f"plan {call_id}",
        workflow.now(),
    )
    return ToolResult(
        ok=True,
        output=f"plan approved as grant {grant.id} until {grant.expires_at}: calls within [{envelope}] "
        "run without asking; any other call waits for a person",
    )


def rejected(decision: Decision) -> ToolResult:
    return ToolResult(ok=False, error_type=ErrorType.REJECTED, output=f"a person rejected this call: {decision.reason}")
