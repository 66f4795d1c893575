"""Schedules: runs (or a session's messages) started by time, on Temporal Schedules.

A schedule is a Temporal Schedule like any other (`temporal schedule list`, the Web UI's Schedules
page): its action starts `AgentWorkflow` with a run's input, or, for a session, the
`RatchetScheduledMessage` workflow, which hands one message to the session and ends
(workflows/scheduled_message.py). Temporal appends each firing's time to the action's workflow id,
so a scheduled run's id is `{schedule}-{time}`: an ordinary run, listed, rolled back and forked as
any other. `ratchet.client.schedules` is the one caller of the schedule RPCs.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field, model_validator

from ratchet.contracts.base import NAME_PATTERN, Strict
from ratchet.contracts.run import AgentRun
from ratchet.contracts.session import AskRequest

SCHEDULED_MESSAGE_WORKFLOW = "RatchetScheduledMessage"
Overlap = Literal["skip", "buffer_one", "buffer_all", "cancel_other", "terminate_other", "allow_all"]
"""What a firing does while the previous one's run is still open (Temporal's overlap policies):
`skip` it (the default), queue one or all, cancel or terminate the running one, or run both."""


class ScheduleRequest(Strict):
    """A schedule to create: when (`cron` or `every_s`), what (`run` or `session_id` with `text`),
    and Temporal's policies."""

    name: str = Field(pattern=NAME_PATTERN, description="The schedule's id (and its runs' id prefix).")
    cron: str | None = Field(None, min_length=1, description='A cron line, e.g. "0 7 * * 1-5" (UTC).')
    every_s: float | None = Field(None, ge=1, description="Or an interval, in seconds.")
    time_zone: str | None = Field(None, description="The cron line's time zone (IANA name; default UTC).")
    run: AgentRun | None = Field(None, description="Each firing starts this run.")
    session_id: str | None = Field(None, min_length=1, max_length=200, description="Or sends `text` to this session.")
    text: str | None = Field(None, description="The session's message (with `session_id`).")
    overlap: Overlap = "skip"
    catchup_window_s: float | None = Field(
        None, ge=1, description="Firings missed (the server down) run late within this window (default: a year)."
    )
    jitter_s: float = Field(0, ge=0, description="Each firing up to this many seconds late, at random.")
    paused: bool = False
    note: str = Field("", max_length=500)

    @model_validator(mode="after")
    def _one_of_each(self) -> ScheduleRequest:
        if (self.cron is None) == (self.every_s is None):
            raise ValueError("give one of cron or every_s")
        if (self.run is None) == (self.session_id is None):
            raise ValueError("give one of run or session_id")
        if self.session_id is not None and self.text is None:
            raise ValueError("session_id needs text: the message each firing sends")
        if self.text is not None:
            AskRequest(message_id="check", text=self.text)  # the session's own rules for a message
        return self


class ScheduledMessage(Strict):
    """`RatchetScheduledMessage`'s input: the message a firing sends to a session. Its message id is
    the firing's workflow id, so a delivery retried after a lost reply is answered once."""

    session_id: str = Field(min_length=1, max_length=200)
    text: str = Field(min_length=1)


class Deliver(Strict):
    """The `schedule.deliver` activity's input: the message and its id."""

    session_id: str
    message_id: str
    text: str


class ScheduledRun(BaseModel):
    """One firing: the run it started (or the message workflow), when, and how it is doing."""

    workflow_id: str
    scheduled_at: datetime
    started_at: datetime
    status: str | None = None
    """Temporal's status of the started workflow (RUNNING, COMPLETED, FAILED, ...)."""
    phase: str | None = None
    """The run's phase (`RatchetPhase`), for a run."""


class ScheduleInfo(BaseModel):
    """A schedule as `ratchet schedule list` shows it."""

    name: str
    when: str
    """`cron 0 7 * * 1-5`, `every 3600s`, or what the Temporal spec holds."""
    target: str
    """`coder: triage new issues` for a run, `session chat-1: good morning` for a message."""
    paused: bool
    note: str = ""
    overlap: str = ""
    next_runs: list[datetime] = []
    recent: list[ScheduledRun] = []
    """The latest firings, oldest first (Temporal keeps the last ten)."""
    fired: int = 0
    missed: int = 0
    """Firings missed beyond the catch-up window."""
    skipped: int = 0
    """Firings skipped by the overlap policy."""
