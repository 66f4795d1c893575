"""Stopping a step in flight: the run's deadline and a person's rollback, pause or cancel
(deterministic, no I/O).

A step (the model call, the reply's tool calls with their approvals, `wait` timers and
sub-agents, the verification) runs as a task that `race` watches. The moment the run is asked to
stop (the deadline's durable timer fired, a rollback was requested, the run was paused, or the
run itself was cancelled) the step is cancelled where it stands, and the loop serves the request
at once:

- a `wait` timer and an approval wait end at once;
- a tool activity is cancelled through its heartbeat (tool activities heartbeat, and are
  scheduled with WAIT_CANCELLATION_COMPLETED): the step ends only once the tool has stopped, so
  an undo never runs beside the call it undoes;
- a sub-agent is cancelled, and compensates its own effects (its failure policy is rollback_all);
- the model call and the verification are abandoned (their activities learn it at their next
  heartbeat; their results would not be used).

A step that is undoing effects (phase ROLLING_BACK: the revert of a failed verification) is not
cut in the middle of it: the request waits until that undo is done. Calls the step did not finish
go back to the model as `Interrupted` (workflows/acting.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from datetime import datetime, timedelta
from typing import Any, TypeVar

from temporalio import workflow

from ratchet.contracts import AgentState, Phase, RunPlan
from .phases import Phases

T = TypeVar("T")


class Interrupted(Exception):
    """The step in flight was cancelled because the run was asked to stop."""


async def race(step: Coroutine[Any, Any, T], stop: Callable[[], bool], state: AgentState) -> T:
    """Run `step` until it ends or `stop()` turns true; raise `Interrupted` if it was cut short.
    A step that ends with an error raises it; the run's own cancellation stops the step first."""
    task = asyncio.create_task(step)
    try:
        await workflow.wait_condition(lambda: task.done() or (stop() and _interruptible(state)))
    except asyncio.CancelledError:  # the run itself was cancelled: stop the step, then compensate
        await _cancel(task, state)
        if not task.cancelled():
            task.exception()  # retrieved: the run's cancellation wins over how the step ended
        raise
    if not task.done():
        await _cancel(task, state)
        if task.cancelled():
            raise Interrupted()
    return task.result()  # finished (or failed) before the cancellation reached it


async def _cancel(task: asyncio.Task[Any], state: AgentState) -> None:
    """Cancel the step once it is not undoing anything, and wait until it has stopped."""
    await workflow.wait_condition(lambda: task.done() or _interruptible(state))
    task.cancel()
    await workflow.wait_condition(task.done)


async def wait_while_paused(state: AgentState, plan: RunPlan, phases: Phases, woken: Callable[[], bool]) -> None:
    """PAUSED until resumed or `woken()` (a rollback request is served while paused, the deadline
    ends a paused run): it costs nothing but history."""
    running = phases.enter(state, Phase.PAUSED, plan)
    await workflow.wait_condition(lambda: not state.paused or woken())
    phases.back(state, running, plan)


def _interruptible(state: AgentState) -> bool:
    return state.phase != Phase.ROLLING_BACK


class Deadline:
    """The time budget (`budget.max_duration_s`) as a durable timer: one per run, restarted by a
    continuation with what is left. Once it fired, the step in flight is interrupted."""

    def __init__(self) -> None:
        self.passed = False
        self._timer: asyncio.Task[None] | None = None

    def start(self, state: AgentState, plan: RunPlan) -> None:
        limit = plan.budget.max_duration_s
        if limit is None:
            return
        left = limit - self.elapsed_s(state, plan)
        if left <= 0:
            self.passed = True
            return

        async def deadline() -> None:
            await workflow.sleep(timedelta(seconds=left), summary=f"deadline: budget.max_duration_s {limit:g}s")
            self.passed = True

        self._timer = asyncio.create_task(deadline())

    def elapsed_s(self, state: AgentState, plan: RunPlan) -> float:
        """The run's age (since its first start); once the timer fired, at least the budget."""
        started = datetime.fromisoformat(state.started_at) if state.started_at else workflow.now()
        elapsed = (workflow.now() - started).total_seconds()
        if self.passed and plan.budget.max_duration_s is not None:  # the timer is the authority
            return max(elapsed, plan.budget.max_duration_s)
        return elapsed
