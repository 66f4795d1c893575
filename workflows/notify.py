"""Webhooks out, the run's side (deterministic, no I/O): which of the run's stream events its
profile's `notify` targets are told of, and starting each delivery.

`RunStream` hands every event it publishes to `Notifier.published`, with its stream offset. For
each target listing the event (ratchet/contracts/notify.py) a `RatchetNotify` workflow is started
as an abandoned child (workflows/notify_delivery.py): the run goes on at once, the delivery
outlives it (a `run_ended` is sent after the run closed), and a receiver that is down is retried
without the run knowing. The child's id, `notify-{run}-{offset}-{target}`, and the delivery's
`Idempotency-Key`, `{run}/notify/{offset}/{target}`, are fixed by the event's place in the stream,
which continues across continue-as-new: a start that is retried or replayed starts nothing new.

The starts are tasks of the workflow; `settled` waits for them before the run continues as new or
closes, so every start is in the history before the run that made it ends (a few ms: the server
records the child's start).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import WorkflowAlreadyStartedError

from ratchet.contracts import NOTIFY_WORKFLOW, AgentState, Notify, NotifyBody, NotifyDelivery, NotifyEvent, Phase
from ratchet.contracts.events import (
    ApprovalRequested,
    CheckpointTaken,
    DecisionRequested,
    HandoffRequested,
    RolledBack,
    RunEnded,
    _Event,
)

DELIVERY_WINDOW = timedelta(days=1)
"""How long a delivery is tried (the `RatchetNotify` workflow's execution timeout)."""
KINDS: dict[type[_Event], NotifyEvent] = {
    ApprovalRequested: "approval_requested",
    DecisionRequested: "decision_requested",
    HandoffRequested: "handoff_requested",
    CheckpointTaken: "checkpoint",
    RolledBack: "rollback",
    RunEnded: "run_ended",
}


def told(event: _Event, target: Notify) -> NotifyEvent | None:
    """What `target` is told of `event`: its event name, or None (it does not list it)."""
    kind = KINDS.get(type(event))
    if isinstance(event, RunEnded) and event.phase == Phase.BUDGET_EXHAUSTED and "budget_exhausted" in target.events:
        return "budget_exhausted"
    return kind if kind is not None and kind in target.events else None


class Notifier:
    def __init__(self) -> None:
        self._starting: list[asyncio.Task[None]] = []

    def published(self, state: AgentState, event: _Event, offset: int) -> None:
        plan = state.plan
        if plan is None or not plan.notify:
            return
        for n, target in enumerate(plan.notify):
            name = told(event, target)
            if name is None:
                continue
            body = NotifyBody(
                event=name,
                run_id=state.workflow_id,
                agent=plan.agent,
                phase=str(state.phase),
                step=state.step,
                at=workflow.now().isoformat(),
                data=event.model_dump(mode="json", exclude={"offset"}),
            )
            delivery = NotifyDelivery(
                url=target.url, secret=target.secret, key=f"{state.workflow_id}/notify/{offset}/{n}", body=body
            )
            child = f"notify-{state.workflow_id}-{offset}-{n}"
            self._starting.append(asyncio.create_task(_start(delivery, child)))

    async def settled(self) -> None:
        """Every delivery started so far is in the history (before the run continues as new or closes)."""
        while self._starting:
            starting, self._starting = self._starting, []
            await asyncio.gather(*starting)


async def _start(delivery: NotifyDelivery, child_id: str) -> None:
    try:
        await workflow.start_child_workflow(
            NOTIFY_WORKFLOW,
            delivery,
            id=child_id,
            task_queue=workflow.info().task_queue,
            parent_close_policy=workflow.ParentClosePolicy.ABANDON,
            execution_timeout=DELIVERY_WINDOW,
            static_summary=f"{delivery.body.event} of {delivery.body.run_id} to {delivery.url.split('?')[0][:80]}",
        )
    except WorkflowAlreadyStartedError:  # this event's delivery was started before (a retried task)
        pass
