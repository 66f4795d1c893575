"""Heartbeating while an activity waits on something slow (a model reply, a test run, an undo, a
tool), so a dead worker is noticed after the heartbeat timeout instead of the whole start-to-close,
and a cancellation (a rollback, a pause, the run's deadline) reaches the activity at its next
heartbeat: Temporal delivers an activity's cancellation only in answer to a heartbeat."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from contextvars import ContextVar
from typing import Any

from temporalio import activity

INTERVAL_S = 5.0
"""Well within the heartbeat timeout of the activities that heartbeat (ratchet/contracts/activities.py, HEARTBEAT_S)."""

_latest: ContextVar[list[tuple[Any, ...]] | None] = ContextVar("ratchet_heartbeat_details", default=None)
"""The details of the activity's latest `progress` report, repeated by `heartbeating`."""


@asynccontextmanager
async def heartbeating(interval_s: float = INTERVAL_S, details: Sequence[Any] = ()) -> AsyncIterator[None]:
    """Heartbeat every `interval_s` while the block runs, with `details` or, once the activity
    reported its own progress (`progress`), the latest of those: a beat never erases them."""
    latest = [tuple(details)]
    token = _latest.set(latest)

    async def beat() -> None:
        while True:
            await asyncio.sleep(interval_s)
            activity.heartbeat(*latest[0])

    task = asyncio.create_task(beat())
    try:
        yield
    finally:
        task.cancel()
        _latest.reset(token)


def progress(*details: Any) -> None:
    """A heartbeat carrying progress (what a retry resumes from: `ToolContext.heartbeat`)."""
    latest = _latest.get()
    if latest is not None:
        latest[0] = details
    activity.heartbeat(*details)
