"""`schedule.deliver`: a scheduled message handed to its session (workflows/scheduled_message.py).

An `ask` update that does not wait for the turn: it returns once the session holds the message
(queued, joined to the turn in flight, or carried along by a move to a new build). The message id
is the firing's, so a retry after a lost reply is the same message, answered once. A session that
does not exist or has closed takes nothing more: not retried. Any other refusal (a turn in flight
under the `reject` policy, a session about to move) is retried by the activity's policy.
"""

from __future__ import annotations

from typing import Any

from temporalio import activity

from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from ratchet.contracts import AskRequest, Deliver, ErrorType, RunMessages, TurnAnswer
from ratchet.contracts.activities import SCHEDULE_DELIVER


class ScheduleActivities:
    def __init__(self, client: Client | None) -> None:
        self.client = client

    @activity.defn(name=SCHEDULE_DELIVER.name)
    async def deliver(self, req: Deliver) -> str:
        assert self.client is not None, "schedule.deliver needs a Temporal client"
        handle = self.client.get_workflow_handle(req.session_id)
        ask = AskRequest(message_id=req.message_id, text=req.text, wait=False)
        try:
            answer = await handle.execute_update(RunMessages.ASK, ask, result_type=TurnAnswer)
        except WorkflowUpdateFailedError as exc:
            await self._ended(handle)
            raise ApplicationError(f"session {req.session_id} refused the message: {exc.cause}") from None
        except RPCError as exc:
            if exc.status == RPCStatusCode.NOT_FOUND:
                raise _gone(f"session {req.session_id} does not exist") from None
            await self._ended(handle)
            raise
        where = "queued" if answer.turn is None else f"turn {answer.turn}"
        return f"session {req.session_id} took message {req.message_id} ({where})"

    async def _ended(self, handle: WorkflowHandle[Any, Any]) -> None:
        """Raise the non-retryable error when the session has closed; return when it is open."""
        try:
            status = (await handle.describe()).status
        except RPCError as exc:
            if exc.status == RPCStatusCode.NOT_FOUND:
                raise _gone(f"session {handle.id} does not exist") from None
            raise
        if status != WorkflowExecutionStatus.RUNNING:
            raise _gone(f"session {handle.id} has ended ({status.name if status else 'closed'}); it takes no messages")


def _gone(message: str) -> ApplicationError:
    return ApplicationError(message, type=ErrorType.INVALID_INPUT, non_retryable=True)
