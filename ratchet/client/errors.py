"""What `ratchet.client` raises: typed, each with the message a person needs, never a raw RPCError."""

from __future__ import annotations

from pydantic import ValidationError

from ratchet.contracts import problems
from ratchet.ops.connection import TemporalUnreachable


class RatchetError(Exception):
    """Talking to a run failed (the base of the errors below; also Temporal being unreachable)."""


class Unavailable(RatchetError):
    """The Temporal service did not answer (down, restarting, out of reach): the same request may
    succeed later."""


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


class SessionEnded(Refused):
    """A session's update reached a session that has closed: `phase` and `status` say how it ended."""

    def __init__(self, what: str, workflow_id: str, phase: str | None, status: str) -> None:
        ended = f"{phase} ({status})" if phase else status
        super().__init__(what, f"session {workflow_id} has ended {ended}; start a new one or fork it")
        self.workflow_id, self.phase, self.status = workflow_id, phase, status


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
