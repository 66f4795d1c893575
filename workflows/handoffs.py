"""Handoffs: the run goes on under another profile, or waits for a person (deterministic, no I/O;
ratchet/contracts/handoff.py).

The `handoff` call to a profile plans the target profile for this same run (`run.prepare` with the
target as its agent: its instructions, tools, model settings and policies), keeps the run's budget
and workspace, and makes that the run's plan from the next step on. Tools of the profiles before
that the target lacks stay in the plan as `retired_tools` (not offered to the model; their effects
can still be undone). The record goes to `state.handoffs` with the plan it replaced, and to the
model as a message at the next step boundary (the inbox: after this reply's tool results).

A `handoff` call to a person's inbox (`person:alice`, `role:reviewers`) keeps the plan: the record
waits for their `respond` (`wait_for_person`, at the next step boundary, in AWAITING_PERSON), which
finishes the run with their answer, sends the agent a message, or hands the run back to a profile
(planned as above, a second record from the person with their notes).
`rewind` (a rollback to a point before a handoff) restores the plan it replaced.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import ValidationError
from temporalio import workflow

from ratchet.contracts import AgentState, ErrorType, PendingMessage, Phase, PlanRun, RunPlan, ToolResult
from ratchet.contracts.activities import PREPARE
from ratchet.contracts.handoff import Handoff, HandoffArgs, HandoffResponse, is_inbox
from . import calls
from .phases import Phases


async def hand_over(state: AgentState, plan: RunPlan, call_id: str, args: dict[str, Any]) -> ToolResult:
    """The `handoff` call: the run's plan becomes the target's (or it waits for a person at the
    next step boundary); what the model is told of it."""
    try:
        request = HandoffArgs.model_validate(args)
    except ValidationError as exc:
        return _refused(f"invalid handoff: {exc.errors()[0]['loc']}: {exc.errors()[0]['msg']}")
    if request.to not in plan.handoffs:
        return _refused(f"cannot hand off to {request.to!r}: {plan.agent} hands off to {', '.join(plan.handoffs)}")
    record = _record(state, plan, plan.agent, request, call_id)
    if is_inbox(request.to):
        state.handoffs.append(record)
        return ToolResult(ok=True, output=f"handed off to {request.to}: the run waits for their answer")
    await _take_over(state, plan, record)
    return ToolResult(ok=True, output=f"handed off to {request.to}: it goes on from the next step")


def waiting(state: AgentState) -> Handoff | None:
    """The handoff to a person the run waits on, if any (always the latest record)."""
    last = state.handoffs[-1] if state.handoffs else None
    return last if last is not None and last.waiting else None


async def wait_for_person(state: AgentState, plan: RunPlan, phases: Phases, woken: Callable[[], bool]) -> str | None:
    """AWAITING_PERSON until the person answers or `woken()` (a rollback, a pause, the deadline).
    Their answer applied: the run's answer (finish), else None (a reply, a hand back: it goes on)."""
    handoff = waiting(state)
    assert handoff is not None
    if handoff.response is None:  # else it came while the run was paused: taken at once
        before = phases.enter(state, Phase.AWAITING_PERSON, plan)
        await workflow.wait_condition(lambda: handoff.response is not None or woken())
        phases.back(state, before, plan)
    response = handoff.response
    if response is None:
        return None
    handoff.taken = True
    phases.publish(state, plan)  # RatchetHandedTo unset
    if response.action == "finish":
        return response.text
    if response.action == "reply":
        state.session.inbox.append(PendingMessage(text=f"[{response.by} answered your handoff]\n{response.text}"))
        return None
    assert response.to is not None
    args = HandoffArgs(
        to=response.to,
        summary=response.text,
        constraints=response.constraints,
        open_questions=response.open_questions,
    )
    await _take_over(state, plan, _record(state, plan, handoff.to_agent, args, ""))
    return None


def respond(state: AgentState, response: HandoffResponse) -> str:
    """The `respond` update (validated by `validate_response`): the answer waits for the loop."""
    handoff = waiting(state)
    assert handoff is not None
    handoff.response = response.model_copy(update={"at": workflow.now().isoformat()})
    target = f" to {response.to}" if response.to else ""
    return f"{response.action}{target}: {state.workflow_id} handed to {handoff.to_agent}"


def validate_response(state: AgentState, response: HandoffResponse) -> None:
    handoff = waiting(state)
    if handoff is None or state.phase.terminal:
        raise ValueError(f"run {state.workflow_id} is not handed to a person (phase {state.phase})")
    if handoff.response is not None:
        raise ValueError(f"{handoff.to_agent}'s handoff was already answered by {handoff.response.by}")
    if response.action != "hand_back":
        return
    assert state.plan is not None
    back_to = [handoff.from_agent] + [t for t in state.plan.handoffs if not is_inbox(t) and t != handoff.from_agent]
    if response.to not in back_to:
        raise ValueError(f"to: cannot hand back to {response.to!r}: the run may go back to {', '.join(back_to)}")


def rewind(state: AgentState, messages_len: int) -> None:
    """A rollback to a point before handoffs (the conversation cut to `messages_len`): the plan
    before the earliest of them comes back, and their records go."""
    undone = [h for h in state.handoffs if h.messages_len >= messages_len]
    if undone:
        state.plan = undone[0].plan_before
        state.handoffs = [h for h in state.handoffs if h.messages_len < messages_len]


def _record(state: AgentState, plan: RunPlan, by: str, request: HandoffArgs, call_id: str) -> Handoff:
    return Handoff(
        step=state.step,
        call_id=call_id,
        from_agent=by,
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


async def _take_over(state: AgentState, plan: RunPlan, record: Handoff) -> None:
    """The run's plan becomes `record.to_agent`'s, planned for this run; the record kept and told."""
    info = workflow.info()
    target = await calls.call(
        PREPARE,
        PlanRun(workflow_id=info.workflow_id, chain=info.first_execution_run_id, agent=record.to_agent),
        summary=f"step {state.step}: hand off to {record.to_agent}",
    )
    kept = {t.name for t in target.tools}
    retired = {t.name: t for t in [*plan.retired_tools, *plan.tools] if t.name not in kept}
    state.plan = target.model_copy(
        update={"budget": plan.budget, "workspace": plan.workspace, "retired_tools": list(retired.values())}
    )
    state.handoffs.append(record)
    state.session.inbox.append(PendingMessage(text=record.message(target.system_prompt)))


def _refused(problem: str) -> ToolResult:
    return ToolResult(ok=False, output=problem, error_type=ErrorType.INVALID_ARGUMENTS)
