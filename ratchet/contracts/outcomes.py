"""Decisions on unknown outcomes: a side-effecting call whose earlier attempt started and never
recorded a result, of a tool that is not idempotent and has no reconcile hook. The run waits in
`AWAITING_DECISION` until a person (the `decide` update, `ratchet decide`) or the profile's
timeout policy chooses what happens (docs/RELIABILITY.md, "Unknown outcomes")."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, Field

from ratchet.contracts.base import Decider, Strict
from ratchet.contracts.decisions import DecisionProof


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
    proof: DecisionProof | None = None
    """The signed claim of who decides (`decide:<choice>`; ratchet/contracts/decisions.py)."""


class PendingDecision(BaseModel):
    call_id: str
    tool: str
    step: int
    key: str
    arguments: dict[str, Any]
    error: str
    requested_at: str
    digest: str = ""
    """The call's digest (tool, schema, arguments): a signed decision must name it."""


class OutcomeDecision(BaseModel):
    choice: OutcomeChoice
    result: str | None = None
    reason: str = ""
    by: str = "person"
    at: str = ""
    """When it was decided (the workflow's time, ISO 8601)."""
    digest: str = ""
    subject: str | None = None
    """Who signed it, as `issuer` names them, in `role` (None: an unsigned decision)."""
    issuer: str | None = None
    role: str | None = None
    proof: DecisionProof | None = None
