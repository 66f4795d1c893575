"""Approvals: the rules that make a call wait for a person, the wait itself and the decisions, and
durable-timer argument parsing (deterministic, no I/O)."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow

from ratchet.contracts.base import BY_TIMEOUT
from ratchet.contracts.decisions import call_digest
from ratchet.contracts import AgentState, Decision, EffectClass, PendingApproval, Phase, RunPlan, ToolSpec
from .errors import FailRun
from .phases import Phases


MAX_WAIT_S = 366 * 24 * 3600


def needs_approval(plan: RunPlan, spec: ToolSpec, args: dict[str, Any]) -> str | None:
    """Why this call must wait for a person, or None."""
    if spec.effect == EffectClass.IRREVERSIBLE and spec.name not in plan.allow_irreversible:
        return f"{spec.name} is irreversible"
    for rule in plan.approval_rules:
        if rule.tool != spec.name:
            continue
        if rule.argument is None:
            return f"profile requires approval for {spec.name}"
        value = args.get(rule.argument)
        if value is not None and re.search(rule.pattern, str(value)):
            return f"{spec.name} {rule.argument} matches {rule.pattern!r}"
    return None


def decide(state: AgentState, call_id: str, decision: Decision) -> str:
    """A person's approval or rejection of a pending call (the `approve` and `reject` updates)."""
    state.calls.decide(call_id, decision)
    return f"{'approved' if decision.approved else 'rejected'} {call_id}"


def validate_decision(state: AgentState, call_id: str) -> PendingApproval:
    """The approval `call_id` waits for; ValueError if it waits for none (decided already: by whom, when)."""
    calls = state.calls
    decided = calls.decisions.get(call_id)
    if decided is not None:  # used once: a second decision changes nothing
        verdict = "approved" if decided.approved else "rejected"
        raise ValueError(f"call {call_id!r} was already decided: {verdict} by {decided.by} at {decided.at}")
    pending = next((p for p in calls.pending_approvals if p.call_id == call_id), None)
    if pending is not None:
        return pending
    waiting = ", ".join(p.call_id for p in calls.pending_approvals) or "none"
    raise ValueError(f"no pending approval for call {call_id!r}; pending: {waiting}")


def on_timeout(plan: RunPlan, at: str) -> Decision:
    approved = plan.on_approval_timeout == "approve"
    return Decision(approved=approved, reason="no decision before the approval timeout", by=BY_TIMEOUT, at=at)


def timer_seconds(args: dict[str, Any], now: datetime) -> tuple[float, str | None]:
    seconds: Any = args.get("seconds")  # a number, checked below
    until = args.get("until")
    if (seconds is None) == (until is None):
        return 0, "wait needs exactly one of 'seconds' or 'until'"
    if until is not None:
        try:
            target = datetime.fromisoformat(str(until).replace("Z", "+00:00"))
        except ValueError:
            return 0, f"wait: 'until' is not an ISO 8601 time: {until!r}"
        if target.tzinfo is None:
            return 0, "wait: 'until' needs a time zone, e.g. 2026-12-01T09:00:00Z"
        seconds = (target - now).total_seconds()
    try:
        seconds = float(seconds)
    except (TypeError, ValueError):
        return 0, f"wait: 'seconds' must be a number, got {seconds!r}"
    if not 0 <= seconds <= MAX_WAIT_S:
        return 0, f"wait: {seconds:.0f}s is outside 0..{MAX_WAIT_S}s"
    return seconds, None


async def wait_for(
    state: AgentState,
    plan: RunPlan,
    spec: ToolSpec,
    call_id: str,
    args: dict[str, Any],
    reason: str,
    phases: Phases,
) -> Decision:
    """The call waits for a person (AWAITING_APPROVAL) or the profile's approval timeout; their decision."""
    digest = call_digest(spec.name, spec.schema_digest, args)
    state.calls.ask_approval(
        PendingApproval(
            call_id=call_id,
            tool=spec.name,
            step=state.step,
            arguments=args,
            requested_at=workflow.now().isoformat(),
            reason=reason,
            digest=digest,
        )
    )
    phases.enter(state, Phase.AWAITING_APPROVAL, plan)
    timeout = timedelta(seconds=plan.approval_timeout_s) if plan.approval_timeout_s else None
    try:
        await workflow.wait_condition(lambda: call_id in state.calls.decisions, timeout=timeout)
    except TimeoutError:
        state.calls.decide(call_id, on_timeout(plan, workflow.now().isoformat()).model_copy(update={"digest": digest}))
    state.calls.approval_closed(call_id)
    if not state.calls.pending_approvals:
        phases.enter(state, Phase.ACTING, plan)
    else:
        phases.publish(state, plan)  # the others still wait: RatchetAwaitingApproval holds
    decision = state.calls.decisions[call_id]
    if decision.by == BY_TIMEOUT and plan.on_approval_timeout == "fail":
        raise FailRun(f"step {state.step}: approval for {spec.name} timed out")
    return decision
