"""`wait`: a durable timer. The workflow runs it as `workflow.sleep`, never as a sleeping activity,
so a run can wait a week at no cost but its history, and a worker restart changes nothing."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field, model_validator

from ratchet.core.tools import ToolContext, tool

MAX_WAIT_S = 366 * 24 * 3600


class WaitArgs(BaseModel):
    seconds: float | None = Field(None, gt=0, le=MAX_WAIT_S, description="How long to wait.")
    until: datetime | None = Field(None, description="Or: wait until this time (ISO 8601 with time zone).")

    @model_validator(mode="after")
    def _one(self) -> WaitArgs:
        if (self.seconds is None) == (self.until is None):
            raise ValueError("give exactly one of 'seconds' or 'until'")
        if self.until is not None and self.until.tzinfo is None:
            raise ValueError("'until' needs a time zone, e.g. 2026-12-01T09:00:00Z")
        return self


@tool(kind="timer")
def wait(ctx: ToolContext, args: WaitArgs) -> str:
    """Pause the agent for a duration or until a time (a durable timer)."""
    raise RuntimeError("wait runs in the workflow as a timer, not as an activity")
