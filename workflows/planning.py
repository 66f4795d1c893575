"""STARTING: the run's plan, from the worker (deterministic, no I/O; the planning is activity
`run.prepare`: the profile, its tools and settings resolved once, for the run's whole life)."""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

from ratchet.contracts import STATE_VERSION, AgentRun, AgentState, Message, Phase, PlanRun
from ratchet.contracts.activities import PREPARE
from . import calls
from .errors import invalid_input, raise_if_cancelled, root
from .phases import Phases
from .shared_parts import shared


def new_state(run: AgentRun) -> AgentState:
    return AgentState(
        v=STATE_VERSION, workflow_id=workflow.info().workflow_id, run=run, started_at=workflow.now().isoformat()
    )


async def prepare(state: AgentState, phases: Phases) -> None:
    """The run's plan, and its conversation's start (the system prompt, the objective). A run that
    cannot be planned ends FAILED (a non-retryable InvalidInput) and says so in visibility (agent,
    phase) when run.prepare's failure says the worker publishes search attributes."""
    run = state.run
    try:
        # A regular activity, not a local one: a local activity pending while the run is
        # evicted from the worker cache stalls the workflow task until it times out.
        plan = await calls.call(
            PREPARE,
            PlanRun(workflow_id=workflow.info().workflow_id, chain=workflow.info().first_execution_run_id),
            summary=f"prepare agent {run.agent}",
        )
    except ActivityError as err:
        raise_if_cancelled(err)
        failure = invalid_input(err)
        state.last_error = failure.message
        phases.enter(state, Phase.FAILED)
        cause = root(err)
        details = cause.details if isinstance(cause, ApplicationError) else ()
        publish = bool(details) and isinstance(details[0], dict) and details[0].get("search_attributes") is True
        phases.publish(state, None, search_attributes=publish)
        raise failure from None
    state.plan = plan = shared(plan)  # the parts equal across runs held once (workflows/shared_parts.py)
    start = [Message(role="system", content=plan.system_prompt), Message(role="user", content=run.objective)]
    state.conversation.messages.reset(start)
