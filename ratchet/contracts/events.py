"""What a run's stream carries: typed events on three topics (temporalio.contrib.workflow_streams).

One stream per run (`AgentWorkflow` hosts it; workflows/events.py publishes the steps and the
answer, activities/streaming.py the tokens of a model call). Every event names its `step`, its
`call` (a tool call's id, or `model`), its `attempt` (of a model call; 1 for what the workflow
publishes) and, once read, its `offset` in the stream.

Retries: a model call's text arrives per attempt. An attempt after the first opens with
`AttemptStarted(supersedes=n)`: the text of attempts up to `n` of that step is superseded, and the
reply the run records is the last attempt's. `ratchet.client.LiveText` renders a stream by these
rules: never the same text twice.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, ClassVar, Literal

from pydantic import BaseModel, Field, TypeAdapter


class Topic(StrEnum):
    TOKENS = "tokens"
    """A model call's text and tool-call deltas, as the activity receives them (batched)."""
    STEPS = "steps"
    """Tool calls, approvals, decisions, checkpoints, rollbacks, phases, failovers."""
    ANSWER = "answer"
    """The run's end: its phase and final answer."""


MODEL_CALL = "model"
"""The `call` of a model call's events (a tool call's is its call id)."""


class _Event(BaseModel):
    step: int
    call: str = ""
    attempt: int = 1
    offset: int = -1
    """The event's position in the run's stream (set when read; resume with `from_offset=offset + 1`)."""
    topic: ClassVar[Topic] = Topic.STEPS


class AttemptStarted(_Event):
    """A model call's attempt began streaming. `supersedes` > 0: the text of attempts up to it is
    superseded (a retry: the worker died, the endpoint failed mid-stream, the call timed out)."""

    kind: Literal["attempt_started"] = "attempt_started"
    topic: ClassVar[Topic] = Topic.TOKENS
    supersedes: int = 0


class TextDelta(_Event):
    """Text of a model call's reply: `text` starts at character `at` of this attempt's text."""

    kind: Literal["text"] = "text"
    topic: ClassVar[Topic] = Topic.TOKENS
    at: int
    text: str
    sent_s: float = 0.0
    """When its batch was sent, by the worker's clock (Unix seconds): how late it arrives."""


class ToolCallDelta(_Event):
    """Part of a tool call the model is writing: its `index` in the reply, the `name` once known,
    `arguments` (JSON text) from character `at`."""

    kind: Literal["tool_call_delta"] = "tool_call_delta"
    topic: ClassVar[Topic] = Topic.TOKENS
    index: int
    name: str = ""
    at: int = 0
    arguments: str = ""


def rest_of_reply(
    step: int, attempt: int, published: tuple[bool, int, dict[int, int]], content: str, calls: list[tuple[str, str]]
) -> list[_Event]:
    """What of a reply its attempt did not publish: its `AttemptStarted` unless that went out, the
    text from the character `published` says, each tool call's (name, arguments) from its own."""
    started, text_at, calls_at = published
    fields = {"step": step, "call": MODEL_CALL, "attempt": attempt}
    out: list[_Event] = [] if started else [AttemptStarted(**fields, supersedes=attempt - 1)]
    if content[text_at:]:
        out.append(TextDelta(**fields, at=text_at, text=content[text_at:]))
    for index, (name, arguments) in enumerate(calls):
        at = calls_at.get(index)
        if at is None:
            out.append(ToolCallDelta(**fields, index=index, name=name, arguments=arguments))
        elif arguments[at:]:
            out.append(ToolCallDelta(**fields, index=index, at=at, arguments=arguments[at:]))
    return out


class ToolCallStarted(_Event):
    """A tool call starts running (after its approval, if it needed one)."""

    kind: Literal["tool_call_started"] = "tool_call_started"
    tool: str
    arguments: str = ""


class ToolCallFinished(_Event):
    kind: Literal["tool_call_finished"] = "tool_call_finished"
    tool: str
    ok: bool
    summary: str
    """The start of what the model is told (at most `SUMMARY_CHARS`)."""


class ApprovalRequested(_Event):
    """A call waits for a person (`ratchet approve` / `reject`); it does not run before."""

    kind: Literal["approval_requested"] = "approval_requested"
    tool: str
    arguments: str
    reason: str


class ApprovalDecided(_Event):
    kind: Literal["approval_decided"] = "approval_decided"
    approved: bool
    reason: str = ""
    by: str = "person"


class DecisionRequested(_Event):
    """A call's outcome is unknown; a person (`ratchet decide`) or the timeout policy decides."""

    kind: Literal["decision_requested"] = "decision_requested"
    tool: str
    error: str


class HandoffRequested(_Event):
    """The run was handed to a person's inbox (`ratchet inbox`); it waits for their `respond`."""

    kind: Literal["handoff_requested"] = "handoff_requested"
    to: str
    """`person:NAME` or `role:NAME`."""
    from_agent: str
    summary: str


class CheckpointTaken(_Event):
    kind: Literal["checkpoint"] = "checkpoint"
    checkpoint_id: str
    evidence: str
    """One line: the verifier's command, its exit code, the tests run."""


class RolledBack(_Event):
    kind: Literal["rollback"] = "rollback"
    checkpoint_id: str | None
    reason: str = ""
    undone: list[str] = Field(default_factory=list)
    irreversible: list[str] = Field(default_factory=list)
    not_undone: list[str] = Field(default_factory=list)


class PhaseChanged(_Event):
    kind: Literal["phase"] = "phase"
    phase: str


class FailedOver(_Event):
    kind: Literal["failover"] = "failover"
    from_host: str | None
    to_host: str
    checkpoint_id: str | None
    reason: str


class Withdrawn(_Event):
    """What a reader was shown of a model call's reply is withdrawn: a guardrail on the answer
    matched it (redacted: the run's answer is the redacted text; stopped: there is none)."""

    kind: Literal["withdrawn"] = "withdrawn"
    guardrail: str
    action: str


class RunEnded(_Event):
    """The last event of a run (not of a run that continues as new): its phase and answer."""

    kind: Literal["end"] = "end"
    topic: ClassVar[Topic] = Topic.ANSWER
    phase: str
    answer: str | None = None
    error: str | None = None


RunEvent = Annotated[
    AttemptStarted
    | TextDelta
    | ToolCallDelta
    | ToolCallStarted
    | ToolCallFinished
    | ApprovalRequested
    | ApprovalDecided
    | DecisionRequested
    | HandoffRequested
    | CheckpointTaken
    | RolledBack
    | PhaseChanged
    | FailedOver
    | Withdrawn
    | RunEnded,
    Field(discriminator="kind"),
]
RUN_EVENT: TypeAdapter[RunEvent] = TypeAdapter(RunEvent)
SUMMARY_CHARS = 300
