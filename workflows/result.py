"""How a run ends, and what it returns (deterministic, no I/O): DONE and the other terminal phases,
a failure after the failure policy, an exhausted budget, a cancellation."""

from __future__ import annotations

from typing import NoReturn

from temporalio import workflow
from temporalio.exceptions import ApplicationError

from ratchet.contracts import AgentResult, AgentState, EffectStatus, ErrorType, Phase, RunPlan
from . import rollback, saga
from .phases import Phases


def agent_result(state: AgentState) -> AgentResult:
    """The run's result as it stands: its phase, answer, budget used and the effects it leaves in
    place that could still be undone (listed for a parent, which undoes a sub-agent's)."""
    plan = state.plan  # None: the run failed before it was planned
    left = [e for e in state.effects.stack.items if plan and saga.undoable(plan, e) and e.status != EffectStatus.UNDONE]
    return AgentResult(
        workflow_id=state.workflow_id,
        phase=state.phase,
        answer=state.answer,
        output=state.output,
        steps=state.step,
        used=state.used,
        last_error=state.last_error,
        builds=state.release.builds,
        workspace=plan.workspace if plan else None,
        workspace_host=state.workspace.host,
        effects_left=len(left) + state.effects.archived_left,
        effects=left if workflow.info().parent is not None else [],
    )


def finish(state: AgentState, phases: Phases, phase: Phase, error: str | None = None) -> AgentResult:
    """The run ends in `phase` (a terminal one), with `error` as its last error if given."""
    if error:
        state.last_error = error
    phases.enter(state, phase)
    return agent_result(state)


async def fail(
    state: AgentState,
    plan: RunPlan,
    phases: Phases,
    reason: str,
    policy_applied: bool = False,
    error_type: ErrorType = ErrorType.AGENT_FAILED,
) -> NoReturn:
    """End FAILED (COMPENSATION_FAILED when undoing did not complete) after the failure policy."""
    if not policy_applied:
        await rollback.on_failure(state, plan, phases, reason)
    phase = Phase.COMPENSATION_FAILED if state.phase == Phase.COMPENSATION_FAILED else Phase.FAILED
    finish(state, phases, phase, error=reason)
    message = rollback.failure_message(state, reason)
    raise ApplicationError(message, type=error_type, non_retryable=True) from None


async def out_of_budget(state: AgentState, plan: RunPlan, phases: Phases, reason: str, cut_short: bool) -> AgentResult:
    """BUDGET_EXHAUSTED. At a step boundary the finished steps' work stays; a step the deadline
    cut short is not whole, so the run's failure policy applies first, as for a failure."""
    if cut_short:
        await rollback.on_failure(state, plan, phases, reason)
        if state.phase == Phase.COMPENSATION_FAILED:
            await fail(state, plan, phases, reason, policy_applied=True)
    return finish(state, phases, Phase.BUDGET_EXHAUSTED, error=reason)


async def cancelled(state: AgentState, plan: RunPlan, phases: Phases) -> None:
    """A cancelled run: its failure policy, then CANCELLED (COMPENSATION_FAILED if undoing failed),
    shown by `ratchet list` and RatchetPhase."""
    await rollback.on_failure(state, plan, phases, "cancelled")
    phases.enter(state, Phase.CANCELLED if state.phase != Phase.COMPENSATION_FAILED else state.phase, plan)
