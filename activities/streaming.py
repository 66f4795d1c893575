"""A model call's reply, published to the run's stream while the model writes it.

The provider hands each delta to a `ReplyStream` (ratchet/models/provider.py, `Deltas`), which
coalesces them and publishes batches through temporalio.contrib.workflow_streams (a signal per
batch, deduplicated per publisher). Batches go out `FIRST_INTERVAL_S` apart, the interval doubling
every `FLUSHES_PER_DOUBLING` batches: a call adds a number of history events that grows with the
logarithm of its duration, whatever the number of tokens (a 60 s reply: about 50 batches).

Every attempt opens with `AttemptStarted`; an attempt after the first says the earlier ones are
superseded (their publisher died with the worker, or the endpoint failed mid-stream). Streaming
is best effort: a batch that cannot be published is logged and the call goes on; the reply
recorded is the provider's, streamed or not.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from temporalio import activity
from temporalio.contrib.workflow_streams import WorkflowStreamClient

from ratchet.contracts import Message
from ratchet.contracts.events import MODEL_CALL, AttemptStarted, TextDelta, ToolCallDelta, _Event

FIRST_INTERVAL_S = 0.1
FLUSHES_PER_DOUBLING = 8

log = logging.getLogger(__name__)


class ReplyStream:
    """The deltas of one attempt of one model call (`ratchet.models.provider.Deltas`)."""

    def __init__(self, publisher: WorkflowStreamClient, step: int, attempt: int) -> None:
        self.publisher, self.step, self.attempt = publisher, step, attempt
        self._topics = {}
        self._text: TextDelta | None = None
        self._text_at = 0
        self._calls: dict[int, ToolCallDelta] = {}
        self._calls_at: dict[int, int] = {}
        self._wake = asyncio.Event()
        self.flushes = 0
        self.failed = False

    def text(self, text: str) -> None:
        if not text:
            return
        if self._text is None:
            self._text = self._event(TextDelta, at=self._text_at, text="")
        self._text.text += text
        self._text_at += len(text)
        self._wake.set()

    def tool_call(self, index: int, name: str = "", arguments: str = "") -> None:
        pending = self._calls.get(index)
        if pending is None:
            pending = self._calls[index] = self._event(ToolCallDelta, index=index, at=self._calls_at.get(index, 0))
        pending.name = pending.name or name
        pending.arguments += arguments
        self._calls_at[index] = self._calls_at.get(index, 0) + len(arguments)
        self._wake.set()

    def whole(self, message: Message) -> None:
        """A reply that is already known (recorded by an earlier attempt): all of it at once."""
        self.text(message.content or "")
        for i, call in enumerate(message.tool_calls):
            self.tool_call(i, call.name, call.arguments)

    def _event(self, kind: type[_Event], **fields) -> _Event:
        return kind(step=self.step, call=MODEL_CALL, attempt=self.attempt, **fields)

    def _publish(self, event: _Event) -> None:
        topic = self._topics.get(event.topic)
        if topic is None:
            topic = self._topics[event.topic] = self.publisher.topic(event.topic.value)
        topic.publish(event.model_dump(mode="json", exclude={"offset"}))

    async def flush(self) -> None:
        """Publish what is pending and wait until the server has it."""
        if self._text is not None:
            self._publish(self._text)
            self._text = None
        for index in sorted(self._calls):
            self._publish(self._calls[index])
        self._calls.clear()
        if self.failed:
            return
        try:
            await self.publisher.flush()
        except Exception as exc:  # the stream is best effort; the reply is what counts
            self.failed = True
            log.warning(
                "model call of step %d: publishing its deltas failed, not streaming it further: %s", self.step, exc
            )
        self.flushes += 1

    async def run(self) -> None:
        """Flush as deltas arrive, at most once per interval (which doubles as the call goes on)."""
        while not self.failed:
            await self._wake.wait()
            started = time.monotonic()
            self._wake.clear()
            await self.flush()
            interval = FIRST_INTERVAL_S * 2 ** (self.flushes // FLUSHES_PER_DOUBLING)
            await asyncio.sleep(max(0.0, interval - (time.monotonic() - started)))


@asynccontextmanager
async def reply_stream(step: int, enabled: bool) -> AsyncIterator[ReplyStream | None]:
    """The stream of this attempt's deltas (None when the run's model does not stream)."""
    if not enabled:
        yield None
        return
    attempt = activity.info().attempt
    stream = ReplyStream(WorkflowStreamClient.from_within_activity(), step, attempt)
    stream._publish(stream._event(AttemptStarted, supersedes=attempt - 1))  # goes with the first batch
    flusher = asyncio.create_task(stream.run())
    try:
        yield stream
    finally:
        flusher.cancel()
        try:
            await flusher
        except asyncio.CancelledError:
            pass
        await stream.flush()
