"""Sessions: runs that answer turn after turn (workflows/sessions.py).

A session run, after each final answer, waits in phase AWAITING_MESSAGE for the next message
(`ask` or `send`), until the idle timeout or a `close`. Each turn has a number, its answer, its
budget used and its checkpoints (`Turn`); what a message sent during a turn does is the
session's `MessagePolicy`.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, Field, field_validator

from ratchet.contracts.base import Strict, valid_unicode

MAX_MESSAGE_CHARS = 100_000
"""The longest message a session takes (an `ask` over it is refused; a `send` over it is cut)."""


class MessagePolicy(StrEnum):
    """What a message sent while a turn runs does."""

    QUEUE = "queue"
    """It waits: it is the next turn (the default)."""
    JOIN = "join"
    """It joins the turn in flight at its next step boundary; the turn's answer answers it too."""
    INTERRUPT = "interrupt"
    """The step in flight is cut short (as a pause cuts it), the turn ends `interrupted`, and the
    next turn answers the message (the model is told which calls did not finish)."""
    REJECT = "reject"
    """An `ask` is refused with the reason; a `send` is dropped and counted (`messages_rejected`)."""


class Upgrade(StrEnum):
    """Whether a session moves to a new build of its worker deployment (docs/OPERATIONS.md)."""

    AT_TURNS = "at_turns"
    NEVER = "never"


class SessionPolicy(BaseModel):
    """A profile's (or run's) session settings: a run with one is a session."""

    idle_timeout_s: float = Field(24 * 3600.0, gt=0)
    """How long the session waits for the next message; then it closes DONE."""
    message_policy: MessagePolicy = MessagePolicy.QUEUE
    turn_max_steps: int | None = Field(None, ge=1)
    """A turn's own step budget (beside the session's total, `budget`): a turn that reaches it ends
    `budget_exhausted` and the session waits for the next message."""
    turn_max_tokens: int | None = Field(None, ge=1)
    """A turn's own token budget, as `turn_max_steps`."""
    compact_after_tokens: int | None = Field(None, ge=100)
    """Past this many tokens in the last model call's context, the older turns are summarised
    (activity `model.compact`) and the model sees the summary instead of them (None: never)."""
    turns_per_run: int = Field(10, ge=1, le=10_000)
    """Continue as new after this many turns (at a turn boundary, while idle): the history and the
    handover of a session stay flat however many turns it has."""
    upgrade: Upgrade = Upgrade.AT_TURNS
    """When the worker deployment's build for new runs changes: `at_turns` moves the session onto
    it at its next turn boundary (it continues as new there, conversation and all), `never` keeps
    it on the build it started on (workflows/upgrades.py)."""


class SessionOverride(Strict):
    """A run's `session`: it is a session, with the profile's session settings but these."""

    idle_timeout_s: float | None = Field(default=None, gt=0, le=366 * 24 * 3600)
    message_policy: MessagePolicy | None = Field(
        default=None, description="queue (default), join, interrupt or reject: what a message during a turn does."
    )
    turn_max_steps: int | None = Field(default=None, ge=1, le=1_000_000)
    turn_max_tokens: int | None = Field(default=None, ge=1, le=10_000_000_000)
    compact_after_tokens: int | None = Field(default=None, ge=100, le=10_000_000_000)
    turns_per_run: int | None = Field(default=None, ge=1, le=10_000)
    upgrade: Upgrade | None = Field(
        default=None,
        description="at_turns (default) or never: whether a new build takes the session over at a turn boundary.",
    )

    def applied_to(self, policy: SessionPolicy | None) -> SessionPolicy:
        base = policy if policy is not None else SessionPolicy()
        return base.model_copy(update=self.model_dump(exclude_none=True))


class AskRequest(Strict):
    """The `ask` update: a message, and whether to wait for its turn's answer."""

    message_id: str = Field(min_length=1, max_length=200)
    """The message's id: the same id sent twice is answered once (a retry after a lost reply)."""
    text: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS)
    wait: bool = True
    """True: the update returns the turn's answer; False: it returns at once (the turn to follow)."""

    @field_validator("text")
    @classmethod
    def _text(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        if "\x00" in value or not valid_unicode(value):
            raise ValueError("must be valid Unicode without NUL characters")
        return value


class FollowRequest(Strict):
    """The `answer` update: the answer to message `message_id` once its turn has ended."""

    message_id: str = Field(min_length=1, max_length=200)


class PendingMessage(BaseModel):
    """A message the run has not taken into a turn yet."""

    text: str
    id: str | None = None
    """The `ask`'s message id (None: a `send`)."""
    interrupt: bool = False
    """Sent under the interrupt policy while a turn ran: it cuts that turn short."""


class TurnStatus(StrEnum):
    RUNNING = "running"
    ANSWERED = "answered"
    INTERRUPTED = "interrupted"
    """Cut short by a message under the interrupt policy; the next turn answers that message."""
    BUDGET_EXHAUSTED = "budget_exhausted"
    """It reached its own budget (`turn_max_steps`, `turn_max_tokens`); the session goes on."""


class TurnUsed(BaseModel):
    steps: int = 0
    tokens: int = 0
    cost_usd: float = 0.0


class Turn(BaseModel):
    number: int
    question: str
    message_ids: dict[str, str] = Field(default_factory=dict)
    """The messages this turn answers (its own `ask`, any that joined it): id -> digest of the text."""
    status: TurnStatus = TurnStatus.RUNNING
    answer: str | None = None
    error: str | None = None
    started_at: str
    ended_at: str | None = None
    first_message: int
    """Index of the turn's user message in the conversation (counted from the run's first message)."""
    first_step: int
    """The run's step count when the turn began (its steps are the ones after it)."""
    used: TurnUsed = Field(default_factory=TurnUsed)
    """What the turn spent (the session's total is `AgentState.used`)."""
    before: TurnUsed = Field(default_factory=TurnUsed)
    """The session's totals when the turn began (what the turn spent is counted from them)."""

    @property
    def ended(self) -> bool:
        return self.status != TurnStatus.RUNNING


class TurnAnswer(BaseModel):
    """What `ask` returns: the turn that answers the message and, once it ended, its answer."""

    message_id: str
    turn: int | None
    """None: queued behind the turn in flight (not started yet)."""
    status: TurnStatus | None
    """None while queued."""
    answer: str | None = None
    error: str | None = None
    used: TurnUsed | None = None
    moved: bool = False
    """The session moved to a new build before this message's turn (it continued as new): ask the
    run for this message's `answer` again (ratchet.client does)."""
