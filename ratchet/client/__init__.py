"""`ratchet.client`: the typed API every surface uses to talk to runs (ratchet/client/runs.py)."""

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
    Unreachable,
)
from ratchet.client.stream import LiveText
from ratchet.client.runs import (
    RatchetClient,
    RollbackOutcome,
    RunHandle,
    RunPage,
    RunSummary,
    TranscriptSlice,
    validated_run,
)

__all__ = [
    "RatchetClient",
    "RunHandle",
    "RunPage",
    "RunSummary",
    "TranscriptSlice",
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
    "Unreachable",
]
