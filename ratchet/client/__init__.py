"""`ratchet.client`: the typed API every surface uses to talk to runs (ratchet/client/runs.py)."""

from ratchet.client.errors import (
    InvalidInput,
    NotStartedYet,
    RatchetError,
    Refused,
    RunCancelled,
    RunFailed,
    RunNotFound,
    Unavailable,
)
from ratchet.client.runs import RatchetClient, RollbackOutcome, RunHandle, RunSummary, TranscriptSlice, validated_run

__all__ = [
    "RatchetClient",
    "RunHandle",
    "RunSummary",
    "TranscriptSlice",
    "RollbackOutcome",
    "validated_run",
    "RatchetError",
    "RunNotFound",
    "Refused",
    "NotStartedYet",
    "InvalidInput",
    "RunFailed",
    "RunCancelled",
    "Unavailable",
]
