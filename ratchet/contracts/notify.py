"""Webhooks out: a profile's `notify` targets, and one delivery of one event to one target.

    notify=[Notify(url="https://hooks.example.com/ratchet", events=["approval_requested", "run_ended"],
                   secret="${RATCHET_NOTIFY_SECRET}")]

Each event of the run's stream that a target lists (workflows/notify.py) is delivered by a
`RatchetNotify` workflow of its own (workflows/notify_delivery.py), started as an abandoned child:
the run never waits for a receiver, and a receiver that is down gets the event when it is back
(`notify.send` retries for a day). Each delivery is a POST of `NotifyBody` as JSON with the headers
`Idempotency-Key` (the same on every attempt), `X-Ratchet-Event` and, with a secret,
`X-Hub-Signature-256: sha256=<HMAC-SHA256 of the body>`. `${NAME}` in the URL or the secret is the
worker's environment variable NAME, read when sending (a Slack webhook URL is a secret too).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from ratchet.contracts.base import Strict

NOTIFY_WORKFLOW = "RatchetNotify"
NotifyEvent = Literal[
    "approval_requested",
    "decision_requested",
    "handoff_requested",
    "checkpoint",
    "rollback",
    "run_ended",
    "budget_exhausted",
]
"""What a target can be told of: a call waits for approval; a call whose outcome is unknown waits
for a decision; the run was handed to a person's inbox; a checkpoint was taken; a rollback
ended; the run ended (any way); the run ended because its budget ran out (`budget_exhausted`,
sent instead of `run_ended` to a target that lists it)."""


class Notify(Strict):
    url: str = Field(pattern=r"^(https?://|\$\{)", description="http(s) URL; `${VAR}` parts read from the worker.")
    events: list[NotifyEvent] = Field(min_length=1)
    secret: str | None = Field(None, pattern=r"^\$\{[A-Za-z_][A-Za-z0-9_]*\}$")
    """`${VAR}`: the worker's variable holding the HMAC secret; None: deliveries are not signed."""


class NotifyBody(BaseModel):
    """What a receiver gets."""

    event: NotifyEvent
    run_id: str
    agent: str
    phase: str
    step: int
    at: str
    """When the run published the event (ISO 8601)."""
    data: dict[str, Any]
    """The stream event itself (ratchet/contracts/events.py), as `ratchet serve`'s SSE sends it."""


class NotifyDelivery(Strict):
    """`RatchetNotify`'s input and `notify.send`'s: where, what, and the key every attempt carries."""

    url: str
    secret: str | None = None
    key: str
    body: NotifyBody
