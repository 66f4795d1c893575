"""Heartbeating while an activity waits on something slow (a model reply, a test run, an undo),
so a dead worker is noticed after the heartbeat timeout instead of the whole start-to-close."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from temporalio import activity

INTERVAL_S = 5.0
"""Well within the workflow's heartbeat timeout for these activities (HEARTBEAT_TIMEOUT_S)."""


@asynccontextmanager
async def heartbeating(interval_s: float = INTERVAL_S) -> AsyncIterator[None]:
    async def beat() -> None:
        while True:
            activity.heartbeat()
            await asyncio.sleep(interval_s)

    task = asyncio.create_task(beat())
    try:
        yield
    finally:
        task.cancel()
