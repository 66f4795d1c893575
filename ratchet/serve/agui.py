"""A run as AG-UI events (the `ag-ui-protocol` package's types), and an AG-UI `RunAgentInput` as a
Ratchet request.

The AG-UI thread is the Ratchet run (`thread_id` = workflow id). A `RunAgentInput` for a thread
with no run starts one: its objective is the last user message, the rest of the run
(`agent`, `model`, `budget`, `session`, ...) comes from `forwarded_props`; for a running run the
last user message is sent to it (`send`), joining the conversation at the next step boundary. A
session is one AG-UI run per turn: the message is an `ask` whose message id is the AG-UI `run_id`
(the same input sent twice is answered once), and the AG-UI run finishes with that turn's answer
when the session waits for its next message. Either way the answer streams the run's events from
then on, until the run (or the turn) ends:

| Ratchet | AG-UI |
| --- | --- |
| (start) | RUN_STARTED, STATE_SNAPSHOT (phase, step, budget used) |
| a step | STEP_STARTED / STEP_FINISHED `step N` |
| phase changes | STATE_DELTA (`/phase`, `/step`) |
| the model's text | TEXT_MESSAGE_START / CONTENT / END, once (`LiveText`: a retried call is not shown twice) |
| a tool call | TOOL_CALL_START / ARGS / END when it starts, TOOL_CALL_RESULT when it finishes |
| approvals, decisions, checkpoints, rollbacks, failovers | CUSTOM `ratchet.<kind>` with the event |
| DONE, ROLLED_BACK / any other end | RUN_FINISHED (the answer) / RUN_ERROR (phase and error) |
| a session's turn ended (AWAITING_MESSAGE) | RUN_FINISHED (the turn's answer and number) / RUN_ERROR (its error) |
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    EventType,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    StepFinishedEvent,
    StepStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    UserMessage,
)

from ratchet.client import InvalidInput, LiveText, NotStartedYet, RatchetClient, RunHandle, RunNotFound
from ratchet.contracts import Phase, TurnAnswer, TurnStatus
from ratchet.contracts.events import (
    AttemptStarted,
    PhaseChanged,
    RunEnded,
    RunEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallFinished,
    ToolCallStarted,
)

ENDED_WELL = (Phase.DONE, Phase.ROLLED_BACK)


def last_user_text(request: RunAgentInput) -> str | None:
    for message in reversed(request.messages):
        if isinstance(message, UserMessage):
            if isinstance(message.content, str):
                return message.content
            texts = [getattr(part, "text", "") for part in message.content]
            return "\n".join(t for t in texts if t) or None
    return None


@dataclass
class Begun:
    """What a request did to the thread's run, and where its answer's events start."""

    run: RunHandle
    offset: int
    message_id: str | None = None
    """A session's turn: the `ask` this AG-UI run answers (None: the run's first turn, or a plain run)."""
    answered: TurnAnswer | None = None
    """The turn had ended before (this input was sent before): its answer, with no events to stream."""


async def begin(client: RatchetClient, request: RunAgentInput) -> Begun:
    """Start the thread's run, or give it the message (a session: `ask`; a plain run: `send`)."""
    if not request.thread_id:
        raise InvalidInput("AG-UI input", ["threadId: must not be empty (it is the run's id)"])
    text = last_user_text(request)
    run = client.get(request.thread_id)
    try:
        running: bool | None = await run.running()
    except RunNotFound:
        running = None
    if running is False:
        raise InvalidInput("AG-UI input", [f"thread_id: run {request.thread_id!r} has ended; start a new thread"])
    if text is None:
        raise InvalidInput(
            "AG-UI input", ["messages: a user message is needed (a new run's objective, or the message)"]
        )
    if not running:
        props = request.forwarded_props if isinstance(request.forwarded_props, dict) else {}
        try:
            started = await client.start({**props, "objective": text}, request.thread_id)
        except InvalidInput as exc:  # Temporal refused the id (too long): the thread's, to an AG-UI client
            problems = [p.replace("workflow_id:", "threadId:", 1) for p in exc.problems]
            if problems == exc.problems:
                raise
            raise InvalidInput("AG-UI input", problems) from None
        return Begun(run=started, offset=0)
    offset = await run.stream_end()
    state = await run.state()
    if state.plan is None or state.plan.session is None:
        await run.send(text)
        return Begun(run=run, offset=offset)
    asked = await run.ask(text, message_id=request.run_id, wait=False)
    answered = asked if asked.status not in (None, TurnStatus.RUNNING) else None
    return Begun(run=run, offset=offset, message_id=request.run_id, answered=answered)


class Translation:
    """One AG-UI run's events from a Ratchet run's, in an order @ag-ui/client accepts."""

    def __init__(self, request: RunAgentInput) -> None:
        self.request = request
        self.text = LiveText()
        self.message: str | None = None
        """The id of the text message open, if one is."""
        self.step: int | None = None

    def started(self, snapshot: dict[str, Any]) -> list[BaseEvent]:
        return [
            RunStartedEvent(thread_id=self.request.thread_id, run_id=self.request.run_id),
            StateSnapshotEvent(snapshot=snapshot),
        ]

    def events(self, event: RunEvent) -> list[BaseEvent]:
        out: list[BaseEvent] = []
        if isinstance(event, (AttemptStarted, TextDelta, ToolCallDelta)):
            shown = self.text.feed(event)
            if shown:
                out += self._enter_step(event.step)
                if self.message is None:
                    self.message = f"{self.request.thread_id}/{event.step}"
                    out.append(TextMessageStartEvent(message_id=self.message, role="assistant"))
                out.append(TextMessageContentEvent(message_id=self.message, delta=shown))
            return out  # tool calls are announced when they start (after an approval, if they need one)
        out += self._close_text()
        if isinstance(event, RunEnded):
            return out + self._leave_step() + [self._end(event)]
        out += self._enter_step(event.step)
        if isinstance(event, PhaseChanged):
            delta = [
                {"op": "replace", "path": "/phase", "value": str(event.phase)},
                {"op": "replace", "path": "/step", "value": event.step},
            ]
            out.append(StateDeltaEvent(delta=delta))
        elif isinstance(event, ToolCallStarted):
            out += [
                ToolCallStartEvent(tool_call_id=event.call, tool_call_name=event.tool),
                ToolCallArgsEvent(tool_call_id=event.call, delta=event.arguments),
                ToolCallEndEvent(tool_call_id=event.call),
            ]
        elif isinstance(event, ToolCallFinished):
            out.append(
                ToolCallResultEvent(
                    message_id=f"{self.request.thread_id}/{event.step}/{event.call}",
                    tool_call_id=event.call,
                    content=event.summary,
                    role="tool",
                )
            )
        else:
            out.append(CustomEvent(name=f"ratchet.{event.kind}", value=event.model_dump(mode="json")))
        return out

    def _close_text(self) -> list[BaseEvent]:
        if self.message is None:
            return []
        message, self.message = self.message, None
        return [TextMessageEndEvent(message_id=message)]

    def _enter_step(self, step: int) -> list[BaseEvent]:
        if step == self.step or step < 1:
            return []
        out = self._close_text() + self._leave_step()
        self.step = step
        return out + [StepStartedEvent(step_name=f"step {step}")]

    def _leave_step(self) -> list[BaseEvent]:
        if self.step is None:
            return []
        step, self.step = self.step, None
        return [StepFinishedEvent(step_name=f"step {step}")]

    def _end(self, event: RunEnded) -> BaseEvent:
        if event.phase in ENDED_WELL:
            return RunFinishedEvent(
                thread_id=self.request.thread_id, run_id=self.request.run_id, result={"answer": event.answer}
            )
        return RunErrorEvent(message=event.error or f"the run ended {event.phase}", code=str(event.phase))

    def turn_ended(self, answer: TurnAnswer) -> list[BaseEvent]:
        out = self._close_text() + self._leave_step()
        if answer.status == TurnStatus.ANSWERED:
            result = {"answer": answer.answer, "turn": answer.turn}
            return out + [RunFinishedEvent(thread_id=self.request.thread_id, run_id=self.request.run_id, result=result)]
        return out + [
            RunErrorEvent(message=answer.error or f"turn {answer.turn} {answer.status}", code=str(answer.status))
        ]


async def run_events(client: RatchetClient, request: RunAgentInput) -> AsyncIterator[BaseEvent]:
    """The AG-UI events of one request: checks and the start (or the message) happen before the
    first event, so a bad request is an HTTP error, not an event stream."""
    begun = await begin(client, request)
    stream = await begun.run.open_stream(from_offset=begun.offset)
    return _translated(begun, stream, Translation(request))


async def _turn_answer(begun: Begun) -> TurnAnswer | None:
    """The answer of the turn this AG-UI run follows, once the session waits for its next message."""
    if begun.message_id is not None:
        return await begun.run.answer(begun.message_id)
    turns = (await begun.run.state()).session.turns.items
    if not turns:
        return None
    last = turns[-1]
    return TurnAnswer(message_id="", turn=last.number, status=last.status, answer=last.answer, error=last.error)


async def _translated(begun: Begun, stream: AsyncIterator[RunEvent], translation: Translation):
    run = begun.run
    try:
        state = await run.state()
        snapshot = {"phase": str(state.phase), "step": state.step, "used": state.used.model_dump()}
    except NotStartedYet:
        snapshot = {"phase": str(Phase.STARTING), "step": 0}
    for event in translation.started(snapshot):
        yield event
    if begun.answered is not None:
        for event in translation.turn_ended(begun.answered):
            yield event
        return
    ended = False
    async for change in stream:
        if isinstance(change, PhaseChanged) and change.phase == Phase.AWAITING_MESSAGE:
            answer = await _turn_answer(begun)
            if answer is not None:
                for out in translation.turn_ended(answer):
                    yield out
                return
        for out in translation.events(change):
            yield out
            ended = ended or out.type in (EventType.RUN_FINISHED, EventType.RUN_ERROR)
        if ended:
            return
    if not ended:  # the run closed without its end in the stream (terminated)
        yield RunErrorEvent(message="the run closed without an end event (terminated?)", code="CLOSED")
