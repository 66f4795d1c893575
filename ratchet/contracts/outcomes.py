"""Decisions on unknown outcomes: a side-effecting call whose earlier attempt started and never
recorded a result, of a tool that is not idempotent and has no reconcile hook. The run waits in
`AWAITING_DECISION` until a person (the `decide` update, `ratchet decide`) or the profile's
timeout policy chooses what happens (docs/RELIABILITY.md, "Unknown outcomes")."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, Field

from ratchet.contracts.base import Decider, Strict


class OutcomeChoice(StrEnum):
    RETRY = "retry"
    """Call the tool again under the same key (a person checked: it did not take effect)."""
    ASSUME_DONE = "assume_done"
    """Record the call as done (with `result` as its output, if given): it took effect."""
    SKIP = "skip"
    """Go on without it; the model is told the call's outcome is unknown. Its undo stays in the plan."""
    FAIL = "fail"
    """Fail the run (its failure policy applies)."""


class DecideRequest(Strict):
    """Input of the `decide` update, e.g. `{"call_id": "call_3_0", "choice": "assume_done", "result": "T-12"}`."""

    call_id: str = Field(min_length=1, max_length=200)
    choice: OutcomeChoice
    result: str | None = Field(default=None, max_length=100_000)
    """With `assume_done`: the call's output as the model will see it."""
    reason: str = Field(default="", max_length=2_000)
    by: Decider = "person"


class PendingDecision(BaseModel):
    call_id: str
    tool: str
    step: int
    key: str
    arguments: dict[str, Any]
    error: str
    requested_at: str


class OutcomeDecision(BaseModel):
    choice: OutcomeChoice
    result: str | None = None
    reason: str = ""
    by: str = "person"
    at: str = ""
    """When it was decided (the workflow's time, ISO 8601)."""
