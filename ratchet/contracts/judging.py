"""A judge guardrail's activity (`guardrail.judge`): its input and its verdict."""

from __future__ import annotations

from pydantic import BaseModel

from ratchet.contracts.payloads import Billed, Usage
from ratchet.contracts.plan import ModelSettings


class JudgeRequest(BaseModel):
    guardrail: str
    step: int
    call: str
    """What is judged: `answer`, or the call id."""
    settings: ModelSettings
    """The judge's model, resolved where the run was planned (`RunPlan.judges`)."""
    question: str
    text: str


class JudgeVerdict(BaseModel):
    passed: bool
    reason: str
    usage: Usage
    billed: Billed | None = None
    """As `ModelReply.billed`: the judge's attempts, billed under the cause `judge`."""
