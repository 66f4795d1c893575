"""A session between its turns (deterministic, no I/O): the turn in flight goes on or ends, the
next one starts, or the session waits for a message in AWAITING_MESSAGE, continuing as new while
idle when due, or moving to a new build between turns (workflows/upgrades.py; workflows/sessions.py
holds the turns themselves)."""

from __future__ import annotations

from collections.abc import Callable

from temporalio import workflow

from ratchet.contracts import AgentState, Phase, RunPlan, TurnStatus
from . import handover, sessions, upgrades
from .events import RunStream
from .phases import Phases


async def next_turn(
    state: AgentState,
    plan: RunPlan,
    phases: Phases,
    stream: RunStream,
    first_turn: int,
    rollback_asked: Callable[[], bool],
) -> bool:
    """A session's turn in flight goes on, or ends (an interrupting message, its own budget); between
    turns the next starts, or the session waits for a message (continuing as new when due: every
    `turns_per_run` turns since this execution's `first_turn`). False: it ends (closed, or idle
    past its timeout). A rollback request wakes it: True, the loop serves it and comes back."""
    session = plan.session
    assert session is not None
    if sessions.interrupting(state):
        sessions.close_turn(state, TurnStatus.INTERRUPTED, error="interrupted by a message")
    elif (why := sessions.turn_exhausted(state)) is not None:
        sessions.close_turn(state, TurnStatus.BUDGET_EXHAUSTED, error=why)
    while not sessions.turn_running(state):
        if upgrades.due(plan):  # the deployment sends the session to another build: the next turn runs there
            await move(state, plan, stream, rollback_asked)  # returns only if a rollback came first
            return True
        if state.session.queued:
            sessions.open_next(state)
            break
        if state.session.closing:
            return False
        phases.enter(state, Phase.AWAITING_MESSAGE, plan)
        woken = lambda: sessions.waiting(state) or rollback_asked() or upgrades.due(plan)  # noqa: E731
        if state.session.turn_number - first_turn >= session.turns_per_run or handover.due(plan):
            await handover.hand_over(
                state, plan, stream, woken, upgrade=upgrades.may_upgrade(plan)
            )  # returns only if woken first
        try:
            await workflow.wait_condition(woken, timeout=session.idle_timeout_s, timeout_summary="idle")
        except TimeoutError:
            return False
        if rollback_asked():
            return True
    phases.publish(state, plan)  # the turn it is at (RatchetTurn)
    return True


async def move(
    state: AgentState, plan: RunPlan, stream: RunStream, interrupted: Callable[[], bool], upgrade: bool = False
) -> None:
    """Continue as new onto the deployment's build for this run (workflows/upgrades.py): a session
    that may upgrade, or any run asked to (`upgrade`: a rollback's rerun). Waiting `ask`s return
    `moved` at once (workflows/sessions.py), so the handover need not wait for their turns; queued
    messages are carried. Returns only if `interrupted()` came first."""
    state.release.move()
    await handover.hand_over(state, plan, stream, interrupted, upgrade=upgrade or upgrades.may_upgrade(plan))
    state.release.stay()
