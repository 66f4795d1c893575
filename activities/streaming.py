"""A model call's reply, published to the run's stream while the model writes it.

The provider hands each delta to a `ReplyStream` (ratchet/models/provider.py, `Deltas`), which
coalesces them and publishes batches through temporalio.contrib.workflow_streams (a signal per
batch, deduplicated per publisher). Batches go out `FIRST_INTERVAL_S` apart, the interval doubling
every `FLUSHES_PER_DOUBLING` batches: a call adds a number of history events that grows with the
logarithm of its duration, whatever the number of tokens (a 60 s reply: about 50 batches). What
is left when the call ends (all of a reply written within the first interval) is not sent: the
activity's result says what went out (`ModelReply.streamed`) and the workflow publishes the rest
(workflows/events.py, `rest_of`), which costs no signal and adds nothing to history.

Every attempt opens with `AttemptStarted`; an attempt after the first says the earlier ones are
superseded (their publisher died with the worker, or the endpoint failed mid-stream). Streaming
is best effort: a batch that cannot be published is logged and the call goes on; the reply
recorded is the provider's, streamed or not.
"""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import timedelta
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from temporalio import activity
from temporalio.contrib.workflow_streams import WorkflowStreamClient

from ratchet.contracts import Streamed
from ratchet.contracts.events import MODEL_CALL, AttemptStarted, TextDelta, ToolCallDelta, _Event
from ratchet.ops.redaction import redacted

FIRST_INTERVAL_S = 0.1
FLUSHES_PER_DOUBLING = 8

log = logging.getLogger(__name__)


class ReplyStream:
    """The deltas of one attempt of one model call (`ratchet.models.provider.Deltas`). What goes out
    is redacted as the activity's result is (ratchet/ops/redaction.py); `at` counts what went out."""

    def __init__(self, publisher: WorkflowStreamClient, step: int, attempt: int) -> None:
        self.publisher, self.step, self.attempt = publisher, step, attempt
        self._topics: dict = {}
        self._pending: list[_Event] = [self._event(AttemptStarted, supersedes=attempt - 1)]
        self._text: list[str] = []
        """The text not yet sent, in parts (joined once a batch: a long reply costs linear time)."""
        self._text_at = 0
        self._calls: dict[int, tuple[list[str], list[str]]] = {}
        """Per tool call of the reply: its name, and its arguments not yet sent (in parts)."""
        self._calls_at: dict[int, int] = {}
        self._wake = asyncio.Event()
        self.closing = asyncio.Event()
        """The call is over: the batch in flight, if any, is the last."""
        self.flushes = 0
        self.failed = False
        self._sent: tuple[bool, int, dict[int, int]] = (False, 0, {})
        """What went out (the server has it): the attempt's start, characters of the text, per tool
        call characters of its arguments (`Streamed`)."""
        self.received = 0
        """Characters of the reply received (text, tool names and arguments): an attempt that fails
        without the provider's usage is billed an estimate from them (activities/billing.py)."""

    def text(self, text: str) -> None:
        self.received += len(text)
        self._text.append(text)
        self._wake.set()

    def tool_call(self, index: int, name: str = "", arguments: str = "") -> None:
        self.received += len(name) + len(arguments)
        names, parts = self._calls.setdefault(index, ([], []))
        names.append(name)
        parts.append(arguments)
        self._wake.set()

    def _event(self, kind: type[_Event], **fields) -> _Event:
        return kind(step=self.step, call=MODEL_CALL, attempt=self.attempt, **fields)

    def _batch(self) -> list[_Event]:
        """What is pending as events: one for the text, one per tool call."""
        out, self._pending = self._pending, []
        if text := "".join(self._text):
            text = redacted(text)
            out.append(self._event(TextDelta, at=self._text_at, text=text))
            self._text, self._text_at = [], self._text_at + len(text)
        for index in sorted(self._calls):
            names, parts = self._calls[index]
            name, arguments = "".join(names), redacted("".join(parts))
            at = self._calls_at.get(index, 0)
            out.append(self._event(ToolCallDelta, index=index, name=redacted(name), at=at, arguments=arguments))
            self._calls_at[index] = at + len(arguments)
        self._calls.clear()
        return out

    def streamed(self) -> Streamed:
        """What went out of the reply: the workflow publishes the rest (after the last batch, or
        all of a reply written within the first interval: no signal, nothing added to history)."""
        started, text, calls = self._sent
        return Streamed(attempt=self.attempt, started=started, text=text, calls=calls)

    async def flush(self) -> None:
        """Publish what is pending and wait until the server has it."""
        batch = self._batch()
        if self.failed or not batch:
            return
        now = time.time()
        for event in batch:
            if isinstance(event, TextDelta):
                event.sent_s = now
        for event in batch:
            topic = self._topics.get(event.topic)
            if topic is None:
                topic = self._topics[event.topic] = self.publisher.topic(event.topic.value)
            topic.publish(event.model_dump(mode="json", exclude={"offset"}))
        try:
            await self.publisher.flush()
            self._sent = (True, self._text_at, dict(self._calls_at))
        except Exception as exc:  # the stream is best effort; the reply is what counts
            self.failed = True
            log.warning(
                "model call of step %d: publishing its deltas failed, not streaming it further: %s", self.step, exc
            )
        self.flushes += 1

    async def run(self) -> None:
        """A batch is what arrives within an interval of its first delta (the interval doubling as
        the call goes on). Once `closing` is set the task ends: what is left goes out from the
        workflow with the reply (`streamed`), so a call ends without waiting for a last batch."""
        while not self.failed and not self.closing.is_set():
            await self._wake.wait()
            interval = FIRST_INTERVAL_S * 2 ** (self.flushes // FLUSHES_PER_DOUBLING)
            try:
                await asyncio.wait_for(self.closing.wait(), interval)
            except TimeoutError:
                pass
            self._wake.clear()
            if self.closing.is_set():
                break
            await self.flush()


PUBLISH_RETRY = timedelta(seconds=10)
"""How long a failing flush of deltas is retried before the call stops streaming."""


@asynccontextmanager
async def reply_stream(step: int, enabled: bool) -> AsyncIterator[ReplyStream | None]:
    """The stream of this attempt's deltas (None when the run's model does not stream)."""
    if not enabled:
        yield None
        return
    attempt = activity.info().attempt
    # a flush that keeps failing gives up soon: the stream is best effort, and an activity ending
    # (done, or cancelled at a worker's shutdown) waits for its last flush (the default: 10 minutes)
    client = WorkflowStreamClient.from_within_activity(max_retry_duration=PUBLISH_RETRY)
    stream = ReplyStream(client, step, attempt)
    flusher = asyncio.create_task(stream.run())
    try:
        yield stream
    finally:
        stream.closing.set()
        stream._wake.set()
        await flusher
