"""One run's RPCs, asked again where that is safe and their errors translated (ratchet/client/errors.py).

`RunCalls` is what every part of the client (the handle, the stream readers, the rollback) talks
to a run through: a query is asked again when no answer came in time, an update or a signal is
not (its caller sends it again), and an RPCError never leaves: NOT_FOUND becomes RunNotFound, or
RunClosed (SessionEnded) for a request only a running run takes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from datetime import timedelta
from typing import Any, TypeVar

from pydantic import BaseModel
from temporalio.client import (
    Client,
    WorkflowExecutionDescription,
    WorkflowExecutionStatus,
    WorkflowHandle,
    WorkflowQueryFailedError,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.service import RPCError, RPCStatusCode

from ratchet.client.errors import (
    MovedOn,
    RatchetError,
    Refused,
    RunClosed,
    RunNotFound,
    SessionEnded,
    Unavailable,
    failure_reason,
    lost_connection,
    rpc_error,
)
from ratchet.contracts import AgentResult, RunMessages, TurnAnswer
from ratchet.contracts.search_attributes import RunAttributes

T = TypeVar("T")
QUERY_FIRST_WAIT_S, QUERY_LONGEST_WAIT_S, QUERY_DEADLINE_S, QUERY_BUSY_PAUSE_S = 5.0, 10.0, 35.0, 0.2
"""A query's first attempt waits 5 s for its answer, each next one twice as long up to 10 s, all 35 s
at most; after a "buffer full" it is asked again 0.2 s later (`RunCalls.query`). The longest wait is
bounded because a dropped query holds the run's one place for a buffered query until its wait ends:
every other query to the run is refused as busy meanwhile."""

TO_RUNNING = frozenset(
    {
        RunMessages.SEND_MESSAGE,
        RunMessages.PAUSE,
        RunMessages.RESUME,
        RunMessages.APPROVE,
        RunMessages.REJECT,
        RunMessages.DECIDE,
        RunMessages.ROLLBACK,
        RunMessages.ASK,
        RunMessages.ANSWER,
        RunMessages.CLOSE,
        "cancel",
        "terminate",
    }
)
"""The requests only a running run takes: on a closed one, RunClosed."""


class RunCalls:
    """The RPCs of the run `workflow_id` on `temporal` (the service at `address`), through `handle`."""

    def __init__(self, temporal: Client, workflow_id: str, handle: WorkflowHandle[Any, AgentResult]) -> None:
        self.temporal, self.workflow_id, self.handle = temporal, workflow_id, handle

    @property
    def address(self) -> str:
        """The Temporal service's address, as the errors that name it say it."""
        return self.temporal.service_client.config.target_host

    async def ask(self, what: str, call: Awaitable[T]) -> T:
        """`call`'s result; its errors translated (`_AskAgain`: no answer in time, or the service busy)."""
        try:
            return await call
        except WorkflowQueryFailedError as exc:
            raise Refused(what, str(exc)) from None
        except WorkflowUpdateRPCTimeoutOrCancelledError:
            raise Unavailable(
                f"{self.workflow_id}: {what}: no result came back in time (the request may stand: send it again; "
                "a session's message with the same id is answered once)"
            ) from None
        except RPCError as exc:
            if lost_connection(exc):  # the service went (it stopped midway): said as when it never answered
                raise rpc_error(self.workflow_id, exc, self.address) from None
            if exc.status == RPCStatusCode.NOT_FOUND:
                raise (await self._not_found(what)) from None
            if exc.status in (RPCStatusCode.CANCELLED, RPCStatusCode.DEADLINE_EXCEEDED):
                raise _AskAgain(f"{self.workflow_id}: {what}: no answer in time ({exc})", busy=False) from None
            if exc.status == RPCStatusCode.RESOURCE_EXHAUSTED:
                raise _AskAgain(f"{self.workflow_id}: {what}: the service is busy ({exc})", busy=True) from None
            raise rpc_error(self.workflow_id, exc, self.address) from None

    async def describe(self) -> WorkflowExecutionDescription:
        return await self.ask("describe", self.handle.describe())

    async def running(self) -> bool:
        return (await self.describe()).status == WorkflowExecutionStatus.RUNNING

    async def _not_found(self, what: str) -> RatchetError:
        """What the service's NOT_FOUND means for the request `what`: a signal, an update or a
        cancel that needs a running run reached one that has closed (RunClosed, saying how), or
        there is no such run (RunNotFound)."""
        if what not in TO_RUNNING:
            return RunNotFound(self.workflow_id)
        description = await self.describe()  # RunNotFound: there is no such run
        if description.status == WorkflowExecutionStatus.RUNNING:  # it continued as new meanwhile
            return MovedOn(
                f"{self.workflow_id}: {what}: the run moved on while the request was on its way; send it again"
            )
        return self.closed(what, description)

    async def running_or_closed(self, what: str) -> None:
        """Nothing if the run is running; else RunClosed (RunNotFound: no such run)."""
        description = await self.describe()
        if description.status != WorkflowExecutionStatus.RUNNING:
            raise self.closed(what, description)

    def closed(self, what: str, description: WorkflowExecutionDescription) -> RunClosed:
        """The refusal of `what` by the closed run `description`; of a session, SessionEnded."""
        attributes = description.search_attributes
        phase = (attributes.get(RunAttributes.PHASE.name) or [None])[0]
        status = description.status.name if description.status else "CLOSED"
        closed = SessionEnded if (attributes.get(RunAttributes.SESSION.name) or [False])[0] else RunClosed
        return closed(what, self.workflow_id, str(phase) if phase is not None else None, status)

    async def query(
        self, name: str, *args: Any, result_type: type[T], what: str | None = None, timeout_s: float | None = None
    ) -> T:
        """The query `name`, asked again when no answer came within an attempt's wait: sdk-core drops
        a query it buffered behind a workflow task when that task evicts the run (a worker whose cache
        is full or off logs "There were leftover buffered tasks when evicting run"), and the server then
        waits for an answer that never comes; the query asked again reaches the run as it is now. The
        waits grow up to QUERY_LONGEST_WAIT_S (a run that is not cached replays its history to answer);
        a query the server refuses while its buffer of queries is full (a dropped one holds it) is asked
        again shortly. `timeout_s` (default QUERY_DEADLINE_S) bounds them all; Unavailable past it."""
        what, bound_s = what or name, timeout_s if timeout_s is not None else QUERY_DEADLINE_S
        clock = asyncio.get_running_loop()
        deadline, wait_s = clock.time() + bound_s, QUERY_FIRST_WAIT_S
        while (left_s := deadline - clock.time()) > 0:
            timeout = timedelta(seconds=min(wait_s, left_s))
            try:
                return await self.ask(
                    what, self.handle.query(name, *args, result_type=result_type, rpc_timeout=timeout)
                )
            except _AskAgain as again:
                if again.busy:
                    await asyncio.sleep(min(QUERY_BUSY_PAUSE_S, left_s))
                else:
                    wait_s = min(wait_s * 2, QUERY_LONGEST_WAIT_S)
        raise Unavailable(f"{self.workflow_id}: {what}: no worker answered within {bound_s:g} s")

    async def update(self, name: str, request: BaseModel, result_type: type[T]) -> T:
        try:
            return await self.ask(name, self.handle.execute_update(name, request, result_type=result_type))
        except WorkflowUpdateFailedError as exc:
            raise Refused(name, failure_reason(exc.cause)) from None

    async def session_update(self, name: str, request: BaseModel | None, result_type: type[Any] = TurnAnswer) -> Any:
        """A session's update; a closed session refuses it, saying how it ended."""
        try:
            call = self.handle.execute_update(
                name, *([request] if request is not None else []), result_type=result_type
            )
            return await self.ask(name, call)
        except WorkflowUpdateFailedError as exc:
            raise Refused(name, failure_reason(exc.cause)) from None
        except RunClosed:
            raise
        except RatchetError:  # the session may have closed while the update was on its way
            description = await self.describe()  # RunNotFound if there is no such run
            if description.status == WorkflowExecutionStatus.RUNNING:
                raise
            raise self.closed(name, description) from None


class _AskAgain(Unavailable):
    """An RPC with no answer in time (it may have reached the run) or refused for now (`busy`): a
    query is asked again; an update or a signal is its caller's to send again."""

    def __init__(self, message: str, busy: bool) -> None:
        super().__init__(message)
        self.busy = busy
