"""`ratchet.client`: the typed API every surface uses to talk to runs (ratchet/client/runs.py).

A page of a run's conversation (`RunHandle.transcript`) is a `ratchet.contracts.Transcript`."""

from ratchet.client.errors import (
    IdInUse,
    InvalidInput,
    NotStartedYet,
    RatchetError,
    Refused,
    RunCancelled,
    RunClosed,
    RunFailed,
    RunNotFound,
    SessionEnded,
    Unavailable,
    MovedOn,
    Unreachable,
)
from ratchet.client.inbox import InboxItem
from ratchet.client.listing import RunPage, RunSummary
from ratchet.client.rollback import RollbackOutcome
from ratchet.client.runs import RatchetClient, RunHandle
from ratchet.client.starting import validated_run
from ratchet.client.stream import LiveText

__all__ = [
    "RatchetClient",
    "RunHandle",
    "RunPage",
    "RunSummary",
    "InboxItem",
    "RollbackOutcome",
    "validated_run",
    "LiveText",
    "RatchetError",
    "RunNotFound",
    "RunClosed",
    "Refused",
    "SessionEnded",
    "NotStartedYet",
    "InvalidInput",
    "IdInUse",
    "RunFailed",
    "RunCancelled",
    "Unavailable",
    "MovedOn",
    "Unreachable",
]
