"""The run's stream, workflow side: one `WorkflowStream` (temporalio.contrib.workflow_streams, seen
through workflows/sdk_seams.py) per run, handed to what publishes on it, and the step events
(ratchet/contracts/events.py) read off the state as it changes.

`RunStream` waits (a task of its own) for the phase, the step or a part of the state to change
(each part counts its changes: `Part.version`) and publishes what changed: tool calls finished,
approvals asked and decided, decisions asked, checkpoints, rollbacks, failovers, the end. Phase
changes are published by the transition table as they happen (workflows/phases.py), and
`tool_started` (a call begins to run, which the state does not show) from acting.py.
Publishing from the workflow adds nothing to history: the stream's log is rebuilt by replay.
What an activity publishes (a model call's tokens, activities/streaming.py) arrives as signals,
batched; what of a reply did not go out before the call ended is published from here with the
reply (`rest_of`).

The log keeps the last `RETAINED` items (older ones are truncated; a reader that asks for them
reads from the oldest kept), so a long run's memory and its continue-as-new input stay flat; the
handover carries them and the publishers' dedup state (`Continuation.stream`). At the end
(`close`) a run that a reader follows waits a moment for it to poll the end, so the reader reads
it from the run rather than by a query of the closed run.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from pydantic import TypeAdapter
from temporalio import workflow
from temporalio.contrib.workflow_streams import WorkflowStreamState

from ratchet.contracts import AgentState, Continuation, ModelReply, ToolCallRecord
from ratchet.contracts.window import Window
from ratchet.contracts.events import (
    SUMMARY_CHARS,
    ApprovalDecided,
    ApprovalRequested,
    CheckpointTaken,
    DecisionRequested,
    FailedOver,
    HandoffRequested,
    RolledBack,
    RunEnded,
    Topic,
    ToolCallFinished,
    ToolCallStarted,
    _Event,
    TextDelta,
    rest_of_reply,
)

from .details import current_details, evidence_line
from .notify import Notifier
from .sdk_seams import ObservedStream

RETAINED = 200
"""Items the log keeps (it is cut back to this when it reaches twice as many)."""
SESSION_HANDED_OVER = 30
"""Items a session's handover keeps (it hands over between turns, when its readers have had the
last answer): so its continue-as-new input is as flat after its tenth turn as after its thousandth."""
SESSION_PUBLISHERS = timedelta(seconds=60)
"""How long a session's handover keeps a stream publisher's dedup state (each model call attempt
is one): longer than a cancelled call takes to notice (its heartbeat timeout) and then give up its
last flush (PUBLISH_RETRY), so what a session hands over is bounded by a minute of model calls."""
END_WAIT = timedelta(seconds=1)
"""How long a closing run waits for a reader that follows it to poll for its end (`RunStream.close`)."""
_STATE = TypeAdapter(WorkflowStreamState)


def prior_state(continuation: Continuation | None) -> WorkflowStreamState | None:
    """The stream handed over by the run this one continues (None on a first start)."""
    if continuation is None or continuation.stream is None:
        return None
    return _STATE.validate_python(continuation.stream)


def tool_started(stream: RunStream, state: AgentState, call_id: str, tool: str, arguments: str) -> None:
    stream.publish(ToolCallStarted(step=state.step, call=call_id, tool=tool, arguments=arguments))


def rest_of(stream: RunStream, step: int, reply: ModelReply) -> None:
    """What a streaming model call's activity did not publish of its reply (`ModelReply.streamed`),
    published from here: rebuilt by replay, it adds nothing to history."""
    streamed = reply.streamed
    if streamed is None:
        return
    published = (streamed.started, streamed.text, streamed.calls)
    calls = [(c.name, c.arguments) for c in reply.message.tool_calls]
    for event in rest_of_reply(step, streamed.attempt, published, reply.message.content or "", calls):
        if isinstance(event, TextDelta):
            event.sent_s = workflow.now().timestamp()
        stream.publish(event)


class RunStream:
    def __init__(self, prior: WorkflowStreamState | None, state: Callable[[], AgentState | None]) -> None:
        """Call from the workflow's `__init__` (the SDK registers the stream's handlers there);
        `state`: the run's state, once it has one. From then on its changes are published as they
        happen (a continuation's from what its predecessor published)."""
        self.stream = ObservedStream(prior)
        self._topics = {t: self.stream.topic(t.value) for t in Topic}
        self._seen: _Seen | None = None
        self._state_of = state
        self._follower = asyncio.create_task(self._follow(state))
        self.notifier = Notifier()
        """The profile's webhooks out are told of the events published (workflows/notify.py)."""

    def publish(self, event: _Event) -> None:
        self._topics[event.topic].publish(event.model_dump(mode="json", exclude={"offset"}))
        end = self.stream.end
        state = self._state_of()
        if state is not None and event.topic != Topic.TOKENS:
            self.notifier.published(state, event, end - 1)
        if end - self.stream.base >= 2 * RETAINED:
            self.stream.truncate(end - RETAINED)

    async def _follow(self, state_of: Callable[[], AgentState | None]) -> None:
        """Changes are seen after every activation, the last one of the run included (the workflow
        checks conditions until nothing is ready, also once its run has returned)."""
        await workflow.wait_condition(lambda: state_of() is not None)
        state = state_of()
        assert state is not None
        self._seen = seen = _Seen(state)
        while True:
            key = seen.key
            await workflow.wait_condition(lambda: _key(state) != key)
            self.observe(state)

    def observe(self, state: AgentState) -> None:
        """Publish what changed since the last look, and say it in the run's current details."""
        if self._seen is None:
            self._seen = _Seen(state)
        workflow.set_current_details(current_details(state))
        for event in self._seen.changes(state):
            self.publish(event)

    async def close(self, state: AgentState) -> None:
        """Before the run closes (it ended: `RunEnded` is published now): if a reader follows it,
        wait up to END_WAIT for a poll to take the end. A poll between two others (its reader in its
        cooldown) would otherwise find the run closed, and read the end by a query, which replays the
        run's whole history on a worker (with 20 runs ending at once, the last text 2.5 s late).
        Then the polls waiting in the run are released, with the end (a poll waiting is answered
        either way: `detach_pollers` returns what it has)."""
        self.observe(state)
        await self.notifier.settled()
        end = self.stream.end
        if self.stream.served < end and _followed(self.stream):
            try:
                await workflow.wait_condition(lambda: self.stream.served >= end, timeout=END_WAIT)
            except TimeoutError:
                pass  # the reader went away, or is slow: it reads the closed run
        self.stream.detach_pollers()

    def detach(self) -> None:
        """Before continuing as new: release the readers' long polls (they follow to the next run)."""
        self.stream.detach_pollers()

    def handover(self, state: AgentState) -> dict[str, Any]:
        """The stream's state for the continuation's input, with what changed last (a session's: its
        latest `SESSION_HANDED_OVER` items)."""
        self.observe(state)
        self.detach()
        self._follower.cancel()
        end = self.stream.end
        if state.plan is not None and state.plan.session is not None and end - self.stream.base > SESSION_HANDED_OVER:
            self.stream.truncate(end - SESSION_HANDED_OVER)
        session = state.plan is not None and state.plan.session is not None
        return _STATE.dump_python(
            self.stream.get_state(**({"publisher_ttl": SESSION_PUBLISHERS} if session else {})), mode="json"
        )


def _followed(stream: ObservedStream) -> bool:
    """A reader had a poll answered within END_WAIT (it polls again a cooldown after each)."""
    return workflow.now().timestamp() - stream.polled_s < END_WAIT.total_seconds()


def _key(state: AgentState) -> tuple:
    """What `follow` waits on to change: cheap, asked after every event of the workflow. The parts
    the events come from count their own changes (`Part.version`)."""
    return (state.phase, state.step, state.calls.version, state.effects.version, state.workspace.version)


def _handed(state: AgentState) -> tuple[int, str, str] | None:
    """The handoff to a person the run waits on (its step, inbox and time), or None."""
    last = state.handoffs[-1] if state.handoffs else None
    return (last.step, last.to_agent, last.at) if last is not None and last.waiting else None


def _settled(records: Window[ToolCallRecord]) -> int:
    """The index before which the records no longer move: records are only appended, and only the
    newest step's are put in order again (`Calls.in_order` sorts one reply's, all of one step)."""
    items = records.items
    at = len(items)
    while at and items[at - 1].step == items[-1].step:
        at -= 1
    return records.base + at


class _Seen:
    """What has been published of a state; a part is read again only when its version changed."""

    def __init__(self, state: AgentState) -> None:
        self.key = _key(state)
        self.tool_calls = {r.key for r in state.calls.tool_calls.items}
        self.settled = _settled(state.calls.tool_calls)
        """The records before this index have been looked at and stay where they are: a change is
        read from here on, not from the run's first call again (a step would cost more the longer
        the run)."""
        self.approvals = {p.call_id for p in state.calls.pending_approvals}
        self.decided = set(state.calls.decisions)
        self.pending_decisions = {p.call_id for p in state.calls.pending_decisions}
        self.checkpoints = {(c.id, c.created_at) for c in state.effects.checkpoints.items}
        self.rollbacks = len(state.effects.rollbacks)
        self.failovers = len(state.workspace.failovers)
        self.handed = _handed(state)
        self.ended = state.phase.terminal

    def changes(self, state: AgentState) -> list[_Event]:
        before, self.key = self.key, _key(state)
        out: list[_Event] = []
        if state.calls.version != before[2]:
            out += self._calls(state)
        if state.effects.version != before[3]:
            out += self._effects(state)
        if state.workspace.version != before[4]:
            out += self._failovers(state)
        handed = _handed(state)
        if handed is not None and handed != self.handed:
            h = state.handoffs[-1]
            out.append(HandoffRequested(step=h.step, to=h.to_agent, from_agent=h.from_agent, summary=h.summary))
        self.handed = handed
        if state.phase.terminal and not self.ended:
            self.ended = True
            out.append(RunEnded(step=state.step, phase=state.phase, answer=state.answer, error=state.last_error))
        return out

    def _calls(self, state: AgentState) -> list[_Event]:
        out: list[_Event] = []
        records = state.calls.tool_calls
        for record in records.since(self.settled):
            if record.key not in self.tool_calls:
                self.tool_calls.add(record.key)
                result = record.result
                summary = result.output[:SUMMARY_CHARS]
                out.append(
                    ToolCallFinished(
                        step=record.step, call=record.call_id, tool=record.tool, ok=result.ok, summary=summary
                    )
                )
        self.settled = _settled(records)
        for pending in state.calls.pending_approvals:
            if pending.call_id not in self.approvals:
                self.approvals.add(pending.call_id)
                arguments = _json(pending.arguments)
                out.append(
                    ApprovalRequested(
                        step=pending.step,
                        call=pending.call_id,
                        tool=pending.tool,
                        arguments=arguments,
                        reason=pending.reason,
                    )
                )
        for call_id, decision in state.calls.decisions.items():
            if call_id not in self.decided:
                self.decided.add(call_id)
                out.append(
                    ApprovalDecided(
                        step=state.step,
                        call=call_id,
                        approved=decision.approved,
                        reason=decision.reason,
                        by=decision.by,
                    )
                )
        for undecided in state.calls.pending_decisions:
            if undecided.call_id not in self.pending_decisions:
                self.pending_decisions.add(undecided.call_id)
                out.append(
                    DecisionRequested(
                        step=undecided.step, call=undecided.call_id, tool=undecided.tool, error=undecided.error
                    )
                )
        self.pending_decisions &= {p.call_id for p in state.calls.pending_decisions}  # a retried call may ask again
        return out

    def _effects(self, state: AgentState) -> list[_Event]:
        out: list[_Event] = []
        for cp in state.effects.checkpoints.items:
            if (cp.id, cp.created_at) not in self.checkpoints:
                self.checkpoints.add((cp.id, cp.created_at))
                out.append(CheckpointTaken(step=cp.step, checkpoint_id=cp.id, evidence=evidence_line(cp.evidence)))
        for report in state.effects.rollbacks[self.rollbacks :]:
            out.append(
                RolledBack(
                    step=state.step,
                    checkpoint_id=report.checkpoint_id,
                    reason=report.reason,
                    undone=report.undone,
                    irreversible=report.irreversible,
                    not_undone=report.not_undone,
                )
            )
        self.rollbacks = len(state.effects.rollbacks)
        return out

    def _failovers(self, state: AgentState) -> list[_Event]:
        moves = state.workspace.failovers[self.failovers :]
        self.failovers = len(state.workspace.failovers)
        return [
            FailedOver(
                step=m.step, from_host=m.from_host, to_host=m.to_host, checkpoint_id=m.checkpoint_id, reason=m.reason
            )
            for m in moves
        ]


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)
