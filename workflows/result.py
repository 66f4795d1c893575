"""What a finished run returns (deterministic, no I/O)."""

from __future__ import annotations

from temporalio import workflow

from ratchet.contracts import AgentResult, AgentState, EffectStatus
from . import saga


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
        workspace=plan.workspace if plan else None,
        workspace_host=state.workspace.host,
        effects_left=len(left) + state.effects.archived_left,
        effects=left if workflow.info().parent is not None else [],
    )
