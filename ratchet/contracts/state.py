"""The agent's state machine as data: `AgentState` (the `state` query, docs/STATE.md) in owned
parts, the continue-as-new handover and the run's result.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from ratchet.contracts.approval_policy import Grant
from ratchet.contracts.base import ArtifactRef, Phase
from ratchet.contracts.guardrails import GuardrailTrip
from ratchet.contracts.handoff import Handoff
from ratchet.contracts.outcomes import OutcomeDecision, PendingDecision
from ratchet.contracts.payloads import Message
from ratchet.contracts.plan import RunPlan
from ratchet.contracts.records import (
    BudgetUsed,
    Checkpoint,
    Decision,
    Effect,
    Failover,
    PendingApproval,
    RollbackReport,
    ToolCallRecord,
    Transcript,
)
from ratchet.contracts.run import AgentRun
from ratchet.contracts.session import PendingMessage, Turn
from ratchet.contracts.window import Window


STATE_VERSION = 1
"""`AgentState.v`: the shape of the `state` query's JSON (docs/STATE.md). It changes when a field
moves, is renamed or changes meaning; a reader checks it before it reads the rest."""


class Part(BaseModel):
    """A part of `AgentState`. What the run's stream reports of it changes only through its methods,
    which count the changes (`version`); docs/STATE.md lists the workflows modules that call them."""

    version: int = Field(0, exclude=True)
    """How many times the part's methods changed it (what the run's stream watches,
    workflows/events.py). Not in the query's JSON nor in a handover: a count within one execution."""

    def changed(self) -> None:
        self.version += 1


class Conversation(Part):
    """The messages, and how far the model has seen them (the model's replies: workflows/step.py)."""

    messages: Window[Message] = Field(default_factory=Window[Message])
    """The conversation; messages before `messages.base` were handed over into the transcript
    artifact at a continue-as-new."""
    transcript: str | None = None
    """Digest of the conversation as the model last saw it (the first `unsent` messages)."""
    unsent: int = 0
    """Index (counted from the first message of the run, like `messages_len`) of the first message
    the model has not seen."""
    context_tokens: int = 0
    """Tokens of the last model call (prompt and reply): what compaction watches."""

    @property
    def count(self) -> int:
        """Messages of the run so far, the handed-over ones included (what `unsent` counts in)."""
        return self.messages.end

    def unsent_messages(self) -> list[Message]:
        return self.messages.since(self.unsent)

    def seen(self, transcript: str) -> None:
        """The model has seen every message so far, as the transcript `transcript`."""
        self.transcript, self.unsent = transcript, self.count

    def page(self, offset: int, limit: int) -> Transcript:
        """A page of the conversation (the `transcript` query); messages before the last handover are
        in the transcript artifact (`ratchet.client` reads them from there)."""
        first, messages = self.messages.page(offset, limit)
        return Transcript(total=self.count, offset=first, messages=messages)


class Effects(Part):
    """What the run did to the world, the points it can go back to and its rollbacks (registered by
    workflows/acting.py, undone by workflows/saga.py, archived by workflows/effects_archive.py)."""

    stack: Window[Effect] = Field(default_factory=Window[Effect])
    """The run's effects, oldest first; those before `stack.base` are in the archive."""
    archive: str | None = None
    """Digest of the newest archive segment (each names the one before; workflows/effects_archive.py)."""
    archived_left: int = 0
    """Of the archived effects, how many are undoable and not undone (for `AgentResult.effects_left`)."""
    checkpoints: Window[Checkpoint] = Field(default_factory=Window[Checkpoint])
    """The checkpoints held; `checkpoints.base` of dropped session turns are no longer kept."""
    rollbacks: list[RollbackReport] = Field(default_factory=list)

    @property
    def count(self) -> int:
        """How many effects the run has recorded, the archived ones included."""
        return self.stack.end

    @property
    def last_checkpoint(self) -> Checkpoint | None:
        return self.checkpoints.last

    def unarchive(self, archived: list[Effect]) -> None:
        """The archived effects back in front of the rest: `stack` holds every effect again."""
        self.stack.reset(archived + self.stack.items)
        self.archive, self.archived_left = None, 0

    def add_checkpoint(self, checkpoint: Checkpoint) -> None:
        self.checkpoints.append(checkpoint)
        self.changed()

    def replace_last_checkpoint(self, checkpoint: Checkpoint) -> None:
        self.checkpoints.items[-1] = checkpoint
        self.changed()

    def keep_checkpoints_to(self, checkpoint: Checkpoint | None) -> None:
        """The checkpoints after `checkpoint` go (None: every one): a rollback went back to it."""
        held = self.checkpoints
        held.cut_at(held.base + held.items.index(checkpoint) + 1 if checkpoint is not None else held.base)
        self.changed()

    def drop_checkpoints_before(self, index: int) -> None:
        self.checkpoints.drop_before(index)
        self.changed()

    def add_rollback(self, report: RollbackReport) -> None:
        self.rollbacks.append(report)
        self.changed()


class Calls(Part):
    """Tool call records, approvals and decisions on unknown outcomes (workflows/acting.py,
    workflows/approvals.py, workflows/outcomes.py)."""

    tool_calls: Window[ToolCallRecord] = Field(default_factory=Window[ToolCallRecord])
    """The most recent tool calls; older ones were dropped at handovers (their outputs are in the
    transcript, their side effects in `effects`)."""
    pending_approvals: list[PendingApproval] = Field(default_factory=list)
    decisions: dict[str, Decision] = Field(default_factory=dict)
    """Every decision on a call that needed approval: a person's (`by` their name), the timeout's
    (`timeout`), a profile rule's (`rule:write_file path=docs/**`), a grant's (`grant:<id>`)."""
    grants: list[Grant] = Field(default_factory=list)
    """Grants people gave in this run, expired ones too (workflows/grants.py)."""
    pending_decisions: list[PendingDecision] = Field(default_factory=list)
    """Calls whose outcome is unknown, waiting for `decide` (phase AWAITING_DECISION)."""
    outcome_decisions: dict[str, OutcomeDecision] = Field(default_factory=dict)
    bad_tool_calls: int = 0

    def record(self, record: ToolCallRecord) -> None:
        self.tool_calls.append(record)
        self.changed()

    def in_order(self, first: int, call_ids: list[str]) -> None:
        """The records from index `first` on (one reply's, recorded as they finished) in the reply's order."""
        position = {cid: i for i, cid in enumerate(call_ids)}
        held = self.tool_calls
        at = held.local(first)
        held.items[at:] = sorted(held.items[at:], key=lambda r: position[r.call_id])
        self.changed()

    def drop_records_before(self, index: int) -> None:
        self.tool_calls.drop_before(index)
        self.changed()

    def ask_approval(self, pending: PendingApproval) -> None:
        self.decisions.pop(pending.call_id, None)  # used once: a call asked again (rewound, forked) is decided again
        self.pending_approvals.append(pending)
        self.changed()

    def decide(self, call_id: str, decision: Decision) -> None:
        self.decisions[call_id] = decision
        self.changed()

    def grant(self, grant: Grant) -> None:
        self.grants.append(grant)
        self.changed()

    def approval_closed(self, call_id: str) -> None:
        self.pending_approvals = [p for p in self.pending_approvals if p.call_id != call_id]
        self.changed()

    def decision_closed(self, call_id: str) -> None:
        self.pending_decisions = [p for p in self.pending_decisions if p.call_id != call_id]
        self.changed()

    def ask_decision(self, pending: PendingDecision) -> None:
        self.outcome_decisions.pop(pending.call_id, None)  # a second unknown outcome after `retry` asks again
        self.pending_decisions.append(pending)
        self.changed()

    def decide_outcome(self, call_id: str, decision: OutcomeDecision) -> None:
        self.outcome_decisions[call_id] = decision
        self.changed()

    def stop_waiting(self, call_ids: set[str]) -> None:
        """No call of `call_ids` waits for an approval or a decision any longer."""
        self.pending_approvals = [p for p in self.pending_approvals if p.call_id not in call_ids]
        self.pending_decisions = [p for p in self.pending_decisions if p.call_id not in call_ids]
        self.changed()


class Session(Part):
    """A session's turns and the messages waiting for them (workflows/sessions.py, and
    workflows/compaction.py, which it calls)."""

    turns: Window[Turn] = Field(default_factory=Window[Turn])
    """A session's latest turns; turn `n` is item `n - 1`, older ones were dropped at handovers
    (their messages are in the transcript)."""
    inbox: list[PendingMessage] = Field(default_factory=list)
    """Messages for the turn in flight, added to the conversation at the next step boundary (a
    `send` to a run that is not a session, a message under the `join` policy)."""
    queued: list[PendingMessage] = Field(default_factory=list)
    """A session's messages waiting for a turn of their own, in order."""
    closing: bool = False
    """A session asked to `close`: it ends DONE once its turn in flight and queued messages are answered."""
    messages_rejected: int = 0
    """`send`s dropped by the reject policy (an `ask` is refused instead)."""
    compactions: int = 0
    summaries: list[int] = Field(default_factory=list)
    """The turns at whose end a compaction summarised the turns before (workflows/compaction.py), in
    order: a rollback drops those made after its target, a handover those before the turns it keeps
    but the latest of them."""

    @property
    def compacted_to(self) -> int:
        """The last turn the summaries the conversation holds reach (0: none)."""
        return self.summaries[-1] if self.summaries else 0

    def summarised(self, turn: int) -> None:
        self.summaries.append(turn)
        self.compactions += 1
        self.changed()

    def keep_summaries_after(self, turn: int) -> None:
        """A handover keeps the turns after `turn`: the summaries made since, and the one before."""
        self.summaries = [t for t in self.summaries if t <= turn][-1:] + [t for t in self.summaries if t > turn]
        self.changed()

    def summaries_to(self, turn: int, whole: bool) -> None:
        """A rollback to turn `turn`'s end (`whole`) or into it: the summaries made after it go."""
        self.summaries = [t for t in self.summaries if t < turn or (whole and t == turn)]
        self.changed()

    @property
    def turn_number(self) -> int:
        """The session's latest turn (0: none, or not a session)."""
        return self.turns.end


class Workspace(Part):
    """Where the run's files are (workflows/failover.py binds and moves it)."""

    host: str | None = None
    """Task queue of the host holding the run's workspace (`{RATCHET_TASK_QUEUE}@{host id}`); every
    workspace activity is scheduled there. None: the run has no workspace tools."""
    snapshot: ArtifactRef | None = None
    """Manifest of the workspace's files when the run started (a failover with no checkpoint restores it)."""
    failovers: list[Failover] = Field(default_factory=list)

    def bind(self, host: str, snapshot: ArtifactRef | None) -> None:
        self.host, self.snapshot = host, snapshot
        self.changed()

    def add_failover(self, failover: Failover) -> None:
        self.failovers.append(failover)
        self.changed()


class Release(Part):
    """Which builds of its worker deployment the run ran on (workflows/upgrades.py)."""

    builds: list[str] = Field(default_factory=list)
    """Each build the run ran on, oldest first (one per execution that changed it); empty: the
    worker runs without versioning (RATCHET_VERSIONING=0)."""
    moves: int = 0
    """Times it continued as new onto another build (a session's turn boundary, a deploy's rerun)."""
    moving: bool = Field(False, exclude=True)
    """The run is continuing as new onto another build: a session's waiting `ask`s return `moved`
    (their turn runs there). Not handed over."""

    @property
    def build(self) -> str | None:
        """The build it runs on now (or ended on)."""
        return self.builds[-1] if self.builds else None

    def ran_on(self, build: str) -> None:
        if self.build != build:
            self.builds.append(build)
            self.changed()

    def move(self) -> None:
        self.moving = True
        self.moves += 1
        self.changed()

    def stay(self) -> None:
        """A move given up (a rollback came first)."""
        self.moving = False
        self.moves -= 1
        self.changed()


class AgentState(BaseModel):
    """The `state` query: the run in owned parts (docs/STATE.md)."""

    v: int
    """The shape's version, `STATE_VERSION` (always in the JSON: it has no default)."""
    workflow_id: str
    run: AgentRun
    plan: RunPlan | None = None
    phase: Phase = Phase.STARTING
    """Changed only through the transition table (workflows/phases.py)."""
    step: int = 0
    started_at: str | None = None
    used: BudgetUsed = Field(default_factory=BudgetUsed)
    conversation: Conversation = Field(default_factory=Conversation)
    effects: Effects = Field(default_factory=Effects)
    calls: Calls = Field(default_factory=Calls)
    session: Session = Field(default_factory=Session)
    workspace: Workspace = Field(default_factory=Workspace)
    release: Release = Field(default_factory=Release)
    handoffs: list[Handoff] = Field(default_factory=list)
    """The run's handoffs from one profile to another, each with the plan it replaced (workflows/handoffs.py)."""
    guardrails: list[GuardrailTrip] = Field(default_factory=list)
    """Every guardrail that matched: which, where, what kind, what was done (workflows/guardrails.py)."""
    paused: bool = False
    continued: int = 0
    """How many times this run has continued as new."""
    answer: str | None = None
    output: Any = None
    """The final answer as JSON, for a run with an output schema (`ModelReply.output`)."""
    last_error: str | None = None


class ArchiveEffects(BaseModel):
    """Input of `effects.archive`: effects leaving a handover, after the segment `prev`."""

    effects: list[Effect]
    prev: str | None = None


class TranscriptSlice(BaseModel):
    """Input of `transcript.messages`: messages `start` to `stop` of transcript `digest`."""

    digest: str
    start: int
    stop: int


class Continuation(BaseModel):
    """The input of a run that continues as new: the whole state, same workflow id and keys."""

    continuation: AgentState
    stream: dict[str, Any] | None = None
    """The run's stream as it was handed over (the SDK's `WorkflowStreamState`, as plain data: the
    contracts import only pydantic; workflows/events.py converts it)."""


class AgentResult(BaseModel):
    workflow_id: str
    phase: Phase
    answer: str | None
    output: Any = None
    """The final answer as JSON matching the run's output schema (None without one); the client's
    `RunHandle.output(Model)` returns it as the model type."""
    steps: int
    used: BudgetUsed
    last_error: str | None = None
    builds: list[str] = Field(default_factory=list)
    """The builds of its worker deployment the run ran on, oldest first (`Release.builds`)."""
    workspace: str | None = None
    workspace_host: str | None = None
    effects_left: int = 0
    """How many undoable side effects the run left in place (`ratchet rollback RUN start --dry-run`
    lists them: from the `state` query, not from this result, which stays small)."""
    effects: list[Effect] = Field(default_factory=list)
    """A sub-agent's effects left in place, for its parent, which must be able to undo them; empty
    for a top-level run."""
