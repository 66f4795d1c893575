"""Handoffs: the run goes on under another profile (deterministic, no I/O; ratchet/contracts/handoff.py).

The `handoff` tool's call plans the target profile for this same run (`run.prepare` with the
target as its agent: its instructions, tools, model settings and policies), keeps the run's budget
and workspace, and makes that the run's plan from the next step on. Tools of the profiles before
that the target lacks stay in the plan as `retired_tools` (not offered to the model; their effects
can still be undone). The record goes to `state.handoffs` with the plan it replaced, and to the
model as a message at the next step boundary (the inbox: after this reply's tool results).
`rewind` (a rollback to a point before a handoff) restores the plan it replaced.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError
from temporalio import workflow

from ratchet.contracts import AgentState, ErrorType, PendingMessage, PlanRun, RunPlan, ToolResult
from ratchet.contracts.activities import PREPARE
from ratchet.contracts.handoff import Handoff, HandoffArgs
from . import calls


async def hand_over(state: AgentState, plan: RunPlan, call_id: str, args: dict[str, Any]) -> ToolResult:
    """The `handoff` call: the run's plan becomes the target's; what the model is told of it."""
    try:
        request = HandoffArgs.model_validate(args)
    except ValidationError as exc:
        return _refused(f"invalid handoff: {exc.errors()[0]['loc']}: {exc.errors()[0]['msg']}")
    if request.to not in plan.handoffs:
        return _refused(f"cannot hand off to {request.to!r}: {plan.agent} hands off to {', '.join(plan.handoffs)}")
    info = workflow.info()
    target = await calls.call(
        PREPARE,
        PlanRun(workflow_id=info.workflow_id, chain=info.first_execution_run_id, agent=request.to),
        summary=f"step {state.step}: hand off to {request.to}",
    )
    record = Handoff(
        step=state.step,
        call_id=call_id,
        from_agent=plan.agent,
        to_agent=request.to,
        objective=state.run.objective,
        summary=request.summary,
        evidence=[f"{cp.id}: {cp.summary}" for cp in state.effects.checkpoints.items],
        decisions=[
            f"{cid}: {'approved' if d.approved else 'rejected'} by {d.by}" for cid, d in state.calls.decisions.items()
        ],
        constraints=request.constraints,
        open_questions=request.open_questions,
        at=workflow.now().isoformat(),
        messages_len=state.conversation.count,
        plan_before=plan,
    )
    kept = {t.name for t in target.tools}
    retired = {t.name: t for t in [*plan.retired_tools, *plan.tools] if t.name not in kept}
    state.plan = target.model_copy(
        update={"budget": plan.budget, "workspace": plan.workspace, "retired_tools": list(retired.values())}
    )
    state.handoffs.append(record)
    state.session.inbox.append(PendingMessage(text=record.message(target.system_prompt)))
    return ToolResult(ok=True, output=f"handed off to {request.to}: it goes on from the next step")


def rewind(state: AgentState, messages_len: int) -> None:
    """A rollback to a point before handoffs (the conversation cut to `messages_len`): the plan
    before the earliest of them comes back, and their records go."""
    undone = [h for h in state.handoffs if h.messages_len >= messages_len]
    if undone:
        state.plan = undone[0].plan_before
        state.handoffs = [h for h in state.handoffs if h.messages_len < messages_len]


def _refused(problem: str) -> ToolResult:
    return ToolResult(ok=False, output=problem, error_type=ErrorType.INVALID_ARGUMENTS)
