"""Unknown outcomes become decisions (deterministic, no I/O).

A side-effecting call whose earlier attempt started and never recorded a result, of a tool that
is neither idempotent nor able to reconcile, fails its activity with `OutcomeUnknown`. Instead of
failing the run, the call waits in `AWAITING_DECISION` (listed in `state.calls.pending_decisions`,
findable by `RatchetPhase="AWAITING_DECISION"`) for the `decide` update or the profile's
`decision_timeout_s`, whose `on_decision_timeout` then applies:

- `retry`: the activity runs again under the same key and calls the tool again;
- `assume_done`: the activity records the call as done (with the given result) in the ledger;
- `skip`: the model is told the call's outcome is unknown; its effect stays FAILED, so a rollback
  still runs its undo;
- `fail`: the run fails and its failure policy applies.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ApplicationError

from ratchet.contracts.base import BY_TIMEOUT
from ratchet.contracts.decisions import call_digest
from ratchet.contracts import (
    AgentState,
    DecideRequest,
    ErrorType,
    OutcomeChoice,
    OutcomeDecision,
    PendingDecision,
    Phase,
    RunPlan,
    ToolResult,
    ToolSpec,
)
from .decision_check import signed
from .errors import root
from .phases import Phases


def unknown(err: BaseException) -> bool:
    failure = root(err)
    return isinstance(failure, ApplicationError) and failure.type == ErrorType.OUTCOME_UNKNOWN


async def ask(
    state: AgentState,
    plan: RunPlan,
    spec: ToolSpec,
    call_id: str,
    key: str,
    args: dict[str, Any],
    error: str,
    phases: Phases,
) -> OutcomeDecision:
    """Wait for a decision on `call_id`'s unknown outcome (or the timeout policy's)."""
    state.calls.ask_decision(
        PendingDecision(
            call_id=call_id,
            tool=spec.name,
            step=state.step,
            key=key,
            arguments=args,
            error=error,
            requested_at=workflow.now().isoformat(),
            digest=call_digest(spec.name, spec.schema_digest, args),
        )
    )
    previous = phases.enter(state, Phase.AWAITING_DECISION, plan)
    timeout = timedelta(seconds=plan.decision_timeout_s) if plan.decision_timeout_s else None
    try:
        await workflow.wait_condition(lambda: call_id in state.calls.outcome_decisions, timeout=timeout)
    except TimeoutError:
        timed_out = OutcomeDecision(
            choice=OutcomeChoice(plan.on_decision_timeout),
            reason="no decision before the decision timeout",
            by=BY_TIMEOUT,
            at=workflow.now().isoformat(),
        )
        state.calls.decide_outcome(call_id, timed_out)
    state.calls.decision_closed(call_id)
    if not state.calls.pending_decisions:
        phases.back(state, previous, plan)
    else:
        phases.publish(state, plan)
    return state.calls.outcome_decisions[call_id]


def skipped(spec: ToolSpec, decision: OutcomeDecision) -> ToolResult:
    why = f" ({decision.reason})" if decision.reason else ""
    return ToolResult(
        ok=False,
        error_type=ErrorType.SKIPPED,
        output=f"this {spec.name} call was interrupted and whether it took effect is unknown; it was skipped{why}. "
        "Check before repeating it.",
    )


def decide(state: AgentState, request: DecideRequest) -> str:
    """A person's decision on a call whose outcome is unknown (the `decide` update)."""
    pending = next((p for p in state.calls.pending_decisions if p.call_id == request.call_id), None)
    assert state.plan is not None  # the update's validator asked for a planned run
    decision = OutcomeDecision(
        choice=request.choice,
        result=request.result,
        reason=request.reason,
        at=workflow.now().isoformat(),
        digest=pending.digest if pending is not None else "",
        **signed(state.plan, pending.tool if pending is not None else "", request.proof, request.by),
    )
    state.calls.decide_outcome(request.call_id, decision)
    return f"{request.choice} {request.call_id}"


def validate(state: AgentState, call_id: str) -> PendingDecision:
    """The call `call_id` whose outcome waits for a decision; ValueError if none does."""
    decided = state.calls.outcome_decisions.get(call_id)
    pending = next((p for p in state.calls.pending_decisions if p.call_id == call_id), None)
    if pending is not None and decided is None:
        return pending
    if decided is not None:  # used once: a second decision changes nothing
        raise ValueError(f"call {call_id!r} was already decided: {decided.choice} by {decided.by} at {decided.at}")
    waiting = ", ".join(p.call_id for p in state.calls.pending_decisions) or "none"
    raise ValueError(f"no call {call_id!r} waits for a decision on an unknown outcome; waiting: {waiting}")
