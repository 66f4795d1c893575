"""What `ratchet.client` raises: typed, each with the message a person needs, never a raw RPCError."""

from __future__ import annotations

from pydantic import ValidationError
from temporalio.service import RPCError, RPCStatusCode

from ratchet.contracts import ErrorType, RunMessages, problems
from ratchet.ops.connection import TemporalUnreachable


def failure_reason(failure: BaseException | None) -> str:
    """What a run's failure says, for a person: its message, after its type when the type is one of
    Ratchet's `ErrorType`s (`InvalidInput: agent: unknown profile 'codr'`), never a Python class
    name (an update validator's `ValueError` is its message alone)."""
    if failure is None:
        return "no reason given"
    message = getattr(failure, "message", None)
    if not isinstance(message, str):
        return str(failure)
    kind = getattr(failure, "type", None)
    return f"{kind}: {message}" if kind in ErrorType.__members__.values() else message


class RatchetError(Exception):
    """Talking to a run failed (the base of the errors below; also Temporal being unreachable)."""


class Unavailable(RatchetError):
    """The Temporal service did not answer (down, restarting, out of reach): the same request may
    succeed later."""


class MovedOn(Unavailable):
    """A request reached a run just as it continued as new: the same request to its next run may
    succeed (a session's `answer` is followed so)."""


class Unreachable(Unavailable, TemporalUnreachable):
    """No connection to the Temporal service at all (refused, unknown host): the message names the
    address and what to start. Also a `TemporalUnreachable`, as the worker raises it."""

    def __init__(self, address: str, reason: str) -> None:
        TemporalUnreachable.__init__(self, address, reason)


class RunNotFound(RatchetError):
    """No run (workflow execution) with this id in the namespace."""

    def __init__(self, workflow_id: str) -> None:
        super().__init__(f"{workflow_id}: run not found")
        self.workflow_id = workflow_id


class Refused(RatchetError):
    """The run refused the request (an update's validator, a query's error): `reason` is its word."""

    def __init__(self, what: str, reason: str) -> None:
        super().__init__(f"{what} refused: {reason}")
        self.what, self.reason = what, reason


def ended(phase: str | None, status: str) -> str:
    """How a run ended, in a few words: its phase and, when it says more, the execution's status
    (`DONE (COMPLETED)`, `FAILED`, `BUDGET_EXHAUSTED (COMPLETED)`, `(TERMINATED)`)."""
    if phase is None:
        return f"({status})"
    return phase if phase == status else f"{phase} ({status})"


NO_LONGER = {
    RunMessages.SEND_MESSAGE: "it takes no messages",
    RunMessages.ASK: "it takes no messages",
    RunMessages.APPROVE: "no call of it waits for approval",
    RunMessages.REJECT: "no call of it waits for approval",
    RunMessages.DECIDE: "no call of it waits for a decision",
    RunMessages.PAUSE: "it cannot be paused",
    RunMessages.RESUME: "it is not paused",
    RunMessages.CLOSE: "there is nothing to close",
    "cancel": "there is nothing to cancel",
    "terminate": "there is nothing to terminate",
}
"""What a closed run no longer does, by the request it refused (else: it takes no requests)."""


class RunClosed(Refused):
    """A request for a running run (a message, an approval, a cancel, ...) reached a run that has
    ended: `phase` (RatchetPhase: DONE, FAILED, ...) and `status` (the execution's: COMPLETED,
    FAILED, CANCELED, TERMINATED, ...) say how. Its message is one sentence:
    `ops-8 has ended DONE (COMPLETED): it takes no messages`."""

    def __init__(self, what: str, workflow_id: str, phase: str | None, status: str, then: str | None = None) -> None:
        then = then or NO_LONGER.get(what, "it takes no requests")
        super().__init__(what, f"{workflow_id} has ended {ended(phase, status)}: {then}")
        self.workflow_id, self.phase, self.status = workflow_id, phase, status

    def __str__(self) -> str:
        return self.reason


class IdInUse(Refused):
    """`start` under a workflow id a run already has: `status` (RUNNING, COMPLETED, FAILED, ...) and
    `phase` say what that run is doing or how it ended. A closed one's id takes a new run when
    asked for (`start(..., new_run=True)`); a running one's never."""

    def __init__(self, workflow_id: str, phase: str | None, status: str) -> None:
        how = "is running" if status == "RUNNING" else f"has ended {ended(phase, status)}"
        super().__init__("start", f"a run with id {workflow_id!r} exists already: it {how}")
        self.workflow_id, self.phase, self.status = workflow_id, phase, status

    @property
    def closed(self) -> bool:
        return self.status != "RUNNING"


class SessionEnded(RunClosed):
    """A session's update reached a session that has closed: `phase` and `status` say how it ended."""

    def __init__(self, what: str, workflow_id: str, phase: str | None, status: str) -> None:
        super().__init__(what, workflow_id, phase, status, "start a new one or fork it")
        self.reason = f"session {self.reason}"


class NotStartedYet(RatchetError):
    """The run exists but has no state yet (its first workflow task has not run): ask again."""

    def __init__(self, workflow_id: str) -> None:
        super().__init__(f"{workflow_id} has not started its first step yet; ask again")
        self.workflow_id = workflow_id


class InvalidInput(RatchetError, ValueError):
    """A request that cannot be sent: `problems` names each field (`budget.max_steps: ...`)."""

    def __init__(self, what: str, problems: list[str]) -> None:
        super().__init__(f"invalid {what}: {'; '.join(problems)}")
        self.what, self.problems = what, problems

    @classmethod
    def of(cls, what: str, exc: ValidationError) -> InvalidInput:
        return cls(what, problems(exc, what))


class RunFailed(RatchetError):
    """`result()` of a run that ended failed (or was cancelled or terminated): `reason` says why."""

    def __init__(self, workflow_id: str, reason: str) -> None:
        super().__init__(f"{workflow_id}: {reason}")
        self.workflow_id, self.reason = workflow_id, reason


class RunCancelled(RunFailed):
    """`result()` of a run that was cancelled (`cancel()`, or its parent's cancellation): it ended
    under its failure policy, its rollback done."""


TEMPORAL_FIELDS = {"WorkflowId": "workflow_id"}
"""Temporal's names of a request's fields, as its INVALID_ARGUMENT messages begin, and Ratchet's."""

NO_CONNECTION = ("tcp connect error", "error trying to connect", "connection refused")
"""The bridge's words (tonic's) for a connection that cannot be made (again)."""
CONNECTION_BROKEN = ("transport error", "connection reset", "broken pipe", "connection closed", "h2 protocol error")
"""... and for one that broke with a call in flight."""


def lost_connection(exc: RPCError) -> str | None:
    """Why an RPC failed for want of the service, in a few words (it stopped, the network went, it
    says it is unavailable), after the SDK's own retries; None when the service answered it."""
    message = exc.message.lower()
    if any(words in message for words in NO_CONNECTION):
        return "it no longer accepts connections"
    if any(words in message for words in CONNECTION_BROKEN):
        return "the connection was lost"
    if exc.status == RPCStatusCode.UNAVAILABLE:
        return f"unavailable: {exc.message}"
    return None


def rpc_error(doing: str, exc: RPCError, address: str) -> RatchetError:
    """The error to raise for an RPC to the service at `address` that failed: Unreachable (one line
    naming the address, as when the first connection fails) when the service is gone or
    unavailable, also midway through a command; InvalidInput when it refused the request itself
    (INVALID_ARGUMENT: an empty or too long workflow id, a payload over its size limit), which no
    retry can fix."""
    lost = lost_connection(exc)
    if lost is not None:
        return Unreachable(address, lost)
    if exc.status == RPCStatusCode.INVALID_ARGUMENT:
        message = exc.message.rstrip(".")
        field = next((ours for theirs, ours in TEMPORAL_FIELDS.items() if message.startswith(theirs + " ")), None)
        return InvalidInput("request", [f"{field}: {message}" if field else message])
    return RatchetError(f"{doing}: {exc}")
