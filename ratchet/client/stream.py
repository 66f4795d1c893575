"""A run's stream, read: `RunHandle.stream()` yields its typed events (ratchet/contracts/events.py)
from the offset asked, live while the run runs, across its continue-as-new, and ends when the run
closes (a closed run: what its stream retains). `LiveText` renders a model's text once.

    async for event in run.stream(from_offset=0, topics=["tokens", "answer"]):
        print(event.offset, event)           # resume after a disconnect: from_offset=event.offset + 1

Built on temporalio.contrib.workflow_streams' subscription (long-poll updates on a running run,
queries on a closed one); it ends at the run's `RunEnded`, its last event (always polled for,
whatever the topics asked), so the end needs no query of the closed run. What it would wait on
forever is refused first: a run that does not exist (`RunNotFound`), an unknown topic or an offset
beyond the stream's end (`InvalidInput`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from datetime import timedelta

from pydantic import ValidationError
from temporalio.client import WorkflowUpdateFailedError
from temporalio.contrib.workflow_streams import WorkflowStreamClient
from temporalio.service import RPCError

from ratchet.client.errors import InvalidInput, RatchetError, Refused, failure_reason, rpc_error
from ratchet.client.rpc import RunCalls
from ratchet.contracts.events import RUN_EVENT, AttemptStarted, RunEnded, RunEvent, TextDelta, Topic

POLL_COOLDOWN = timedelta(milliseconds=50)
"""Pause between polls of a reader that is caught up (a poll waits for new events anyway)."""


def checked_topics(topics: Iterable[str] | None) -> list[str]:
    names = [str(t) for t in topics or []]
    known = {t.value for t in Topic}
    unknown = [t for t in names if t not in known]
    if unknown:
        raise InvalidInput(
            "stream", [f"topics: unknown topic {t!r} (a run's topics: {', '.join(known)})" for t in unknown]
        )
    return names


async def opened(run: RunCalls, from_offset: int = 0, topics: Iterable[str] | None = None) -> AsyncIterator[RunEvent]:
    """The checks first (a run that does not exist, an unknown topic, an offset beyond the end
    raise here), then the events (what an HTTP server needs before it answers 200)."""
    wanted = await checked(run, from_offset, topics)
    return read(run, wanted, from_offset)


async def checked(run: RunCalls, from_offset: int, topics: Iterable[str] | None) -> list[str]:
    """The topics asked, once the run exists and the offset is within its stream (see `opened`)."""
    wanted = checked_topics(topics)
    if from_offset < 0:
        raise InvalidInput("stream", [f"from_offset: must be 0 or more, not {from_offset}"])
    await run.describe()  # RunNotFound
    end = await end_of(run)
    if from_offset > end:
        raise InvalidInput(
            "stream", [f"from_offset: {from_offset} is beyond the end of the stream ({end} events so far)"]
        )
    return wanted


async def end_of(run: RunCalls) -> int:
    """The offset the next event of the run's stream will have."""
    return await run.ask("stream", WorkflowStreamClient.create(run.temporal, run.workflow_id).get_offset())


async def events(run: RunCalls, from_offset: int = 0, topics: Iterable[str] | None = None) -> AsyncIterator[RunEvent]:
    async for event in await opened(run, from_offset, topics):
        yield event


async def read(run: RunCalls, topics: list[str], from_offset: int) -> AsyncIterator[RunEvent]:
    """The run's events from `from_offset`, unchecked. Each step of it waits on a poll update the
    run answers when it has new events; a reader dropped meanwhile leaves that poll in flight until
    then (see ratchet/client/shared_stream.py)."""
    reader = WorkflowStreamClient.create(run.temporal, run.workflow_id)
    polled = topics if not topics or Topic.ANSWER.value in topics else [*topics, Topic.ANSWER.value]
    items = reader.subscribe(polled, from_offset, poll_cooldown=POLL_COOLDOWN)
    try:
        async for item in items:
            try:
                event = RUN_EVENT.validate_python(item.data)
            except ValidationError as exc:
                raise RatchetError(f"{run.workflow_id}: event {item.offset} is not a Ratchet event: {exc}") from None
            event.offset = item.offset
            if not topics or item.topic in topics:
                yield event
            if isinstance(event, RunEnded):
                # the run's last event (read whatever the topics asked): the end is known without
                # polling the closed run, which the SDK does by a query that replays its history
                return
    except WorkflowUpdateFailedError as exc:
        raise Refused("stream", failure_reason(exc.cause or exc)) from None
    except RPCError as exc:  # the service went midway (a poll's NOT_FOUND: the run is gone too)
        raise rpc_error(f"{run.workflow_id}: stream", exc, run.address) from None
    finally:
        await items.aclose()  # type: ignore[attr-defined]  # an async generator: its polls stop now


@dataclass
class _Reply:
    attempt: int = 0
    text: str = ""
    """The current attempt's text as received."""
    shown: str = ""
    """What has been shown of this step's reply."""


class LiveText:
    """A model's text, shown once: `feed` each event, print what it returns.

    Per step, the text of the newest attempt counts; a retry's text is shown only past what was
    shown already. When a retried attempt writes something else than the attempt it supersedes
    (a model that does not repeat itself), what was shown stays shown: `feed` then returns a line
    that says so and the new attempt's text from its start.
    """

    RETRIED = "\n[the model call was retried; its reply is:]\n"

    def __init__(self) -> None:
        self.steps: dict[int, _Reply] = {}

    def feed(self, event: RunEvent) -> str:
        if not isinstance(event, (AttemptStarted, TextDelta)):
            return ""
        reply = self.steps.setdefault(event.step, _Reply())
        if event.attempt < reply.attempt:
            return ""  # a late event of a superseded attempt
        if event.attempt > reply.attempt:
            reply.attempt, reply.text = event.attempt, ""
        if isinstance(event, AttemptStarted):
            return ""
        if event.at <= len(reply.text):
            reply.text = reply.text[: event.at] + event.text
        else:  # the events between were truncated away (a reader far behind)
            reply.text += event.text
        if reply.text.startswith(reply.shown):
            new, reply.shown = reply.text[len(reply.shown) :], reply.text
            return new
        if reply.shown.startswith(reply.text):
            return ""  # the retry has not caught up with what was shown
        reply.shown = reply.text
        return self.RETRIED + reply.text
