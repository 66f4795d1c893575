"""One reader of a run's stream for every live reader of it in this process.

A stream is read by long-poll updates (temporalio.contrib.workflow_streams): each waits in the
run until it has new events. A reader that goes away (a browser tab closed or reloaded) cannot
withdraw its poll, so it stays in flight until the run publishes again, and a run waiting for a
person publishes nothing. Temporal admits ten updates in flight per run: ten reloads of a waiting
run's page, each opening the stream, and the run's `approve` was refused. Here readers share one
`_Feed` per run: at most one poll is in flight per run, whoever reads, and once nobody reads, the
feed stops after its poll returns (it starts no other), leaving nothing behind.

The feed keeps the events it has read (up to KEPT); a reader that asks from earlier than the feed
holds gets a reader of its own (`stream.read`, the unshared path; rare: a page rendered just
before the feed started).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from ratchet.client import stream
from ratchet.client.errors import RatchetError
from ratchet.client.rpc import RunCalls
from ratchet.contracts.events import RunEvent

KEPT = 5000
"""Events a feed keeps for readers that join late (the oldest are dropped first)."""


class _Feed:
    """The run's events from `start` on, read once, and who is reading them."""

    def __init__(self, start: int) -> None:
        self.start = start
        self.events: list[RunEvent] = []
        self.readers = 0
        self.done = False
        self.error: RatchetError | None = None
        self._changed = asyncio.Event()

    def first(self) -> int:
        """The offset of the oldest event a reader can still get here."""
        return self.events[0].offset if self.events else self.start

    def since(self, offset: int) -> list[RunEvent]:
        return [e for e in self.events if e.offset >= offset]

    def add(self, event: RunEvent) -> None:
        self.events.append(event)
        del self.events[:-KEPT]
        self._wake()

    def end(self, error: RatchetError | None = None) -> None:
        self.done, self.error = True, error
        self._wake()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def changed(self) -> None:
        await self._changed.wait()


class SharedStreams:
    """The feeds of one client's runs (`RunHandle.open_stream(shared=True)`)."""

    def __init__(self) -> None:
        self._feeds: dict[str, _Feed] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    async def open(self, run: RunCalls, from_offset: int, topics: list[str]) -> AsyncIterator[RunEvent]:
        """The checks of `stream.opened` first, then the run's events from `from_offset`."""
        wanted = set(await stream.checked(run, from_offset, topics))
        feed = self._feeds.get(run.workflow_id)
        if feed is None:
            feed = self._feeds[run.workflow_id] = _Feed(from_offset)
            task = asyncio.create_task(self._follow(run, feed), name=f"stream {run.workflow_id}")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        elif from_offset < feed.first():
            return stream.read(run, sorted(wanted), from_offset)
        feed.readers += 1  # counted before the first await: the feed cannot stop in between
        return self._read(feed, from_offset, wanted)

    async def _follow(self, run: RunCalls, feed: _Feed) -> None:
        events = stream.read(run, [], feed.start)
        try:
            async for event in events:  # between two events no poll is in flight
                feed.add(event)
                if feed.readers == 0:
                    break
            feed.end()
        except RatchetError as exc:
            feed.end(exc)
        finally:
            if self._feeds.get(run.workflow_id) is feed:
                del self._feeds[run.workflow_id]
            await events.aclose()  # type: ignore[attr-defined]  # an async generator

    async def _read(self, feed: _Feed, offset: int, topics: set[str]) -> AsyncIterator[RunEvent]:
        try:
            while True:
                for event in feed.since(offset):
                    offset = event.offset + 1
                    if not topics or type(event).topic in topics:
                        yield event
                if feed.done:
                    if feed.error is not None:
                        raise feed.error
                    return
                await feed.changed()
        finally:
            feed.readers -= 1
