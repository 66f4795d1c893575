"""RatchetScheduledMessage: one firing of a schedule that feeds a session (deterministic, no I/O).

A Temporal Schedule can only start workflows, and a session takes its messages by the `ask` update,
which a workflow cannot send to another. So each firing starts this workflow, whose one activity
(`schedule.deliver`, activities/schedules.py) asks the session without waiting for the answer. The
message's id is this workflow's id (`{schedule}-{firing time}`, unique per firing and the same on
every retry), so a delivery whose reply was lost is not a second message. The workflow ends once
the session holds the message; the session's turn answers it, as any message.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.common import RawValue

from ratchet.contracts import SCHEDULED_MESSAGE_WORKFLOW, Deliver, ScheduledMessage
from ratchet.contracts.activities import SCHEDULE_DELIVER
from . import calls
from .input import validated

EXAMPLE = '{"session_id": "chat-1", "text": "good morning: anything new?"}'


@workflow.defn(name=SCHEDULED_MESSAGE_WORKFLOW, sandboxed=False)  # outside the SDK's sandbox, as AgentWorkflow
class ScheduledMessageWorkflow:
    @workflow.run
    async def run(self, raw: RawValue = None) -> str:  # type: ignore[assignment]  # None: no input
        message = validated(raw, ScheduledMessage, EXAMPLE, "scheduled message")
        deliver = Deliver(session_id=message.session_id, message_id=workflow.info().workflow_id, text=message.text)
        return await calls.call(SCHEDULE_DELIVER, deliver, summary=f"to {message.session_id}")
