"""Sessions: a run that answers turn after turn (deterministic, no I/O).

A session's first turn answers its objective. After each turn the run waits in phase
AWAITING_MESSAGE (a durable wait: it costs nothing but its history) for the next message, until
the session's idle timeout or a `close`; then it ends DONE. A message (`ask`, `send`) sent while a
turn runs follows the session's `MessagePolicy` (queue, join, interrupt, reject).

Each turn ends with a checkpoint of its own (`turn-N`: the conversation and the effects as the
turn left them), so a rollback can take a session back to the end of any turn it still holds; the
turn records what it spent beside the session's total. `ask` is answered by its message id: the
same id asked twice is answered once (within the turns the session holds, `KEEP_TURNS` after a
handover), and an id reused for another text is refused.
"""

from __future__ import annotations

import hashlib

from temporalio import workflow

from ratchet.contracts import (
    AgentState,
    AskRequest,
    Checkpoint,
    Message,
    MessagePolicy,
    PendingMessage,
    RunPlan,
    SessionPolicy,
    Turn,
    TurnAnswer,
    TurnStatus,
    TurnUsed,
)
from . import compaction, failover
from .hosts import HostLost

KEEP_TURNS = 10
"""Turns (and their checkpoints) a session's handover keeps: its state stays flat over any number of
turns. Older turns' messages stay in the transcript."""


def policy(state: AgentState) -> SessionPolicy | None:
    """The run's session settings; None: the run is not a session."""
    return state.plan.session if state.plan is not None else None


def turn_running(state: AgentState) -> bool:
    last = state.session.turns.last
    return last is not None and last.status == TurnStatus.RUNNING


def interrupting(state: AgentState) -> bool:
    """A message under the interrupt policy waits: the turn in flight is to be cut short."""
    return turn_running(state) and any(m.interrupt for m in state.session.queued)


# --- messages in ---------------------------------------------------------------------------------


def validate_ask(state: AgentState, request: AskRequest) -> None:
    """Refuse, with the reason, what the session cannot take (the `ask` update's validator)."""
    session = policy(state)
    if session is None:
        raise ValueError(
            f"run {state.workflow_id} is not a session; `send` a message instead, or start it with session"
        )
    if state.phase.terminal:
        raise ValueError(f"session {state.workflow_id} ended {state.phase}; it takes no more messages")
    known = _digest_of(state, request.message_id)
    if known is not None:
        if known != _digest(request.text):
            raise ValueError(f"message id {request.message_id!r} was used for a different message; use a new id")
        return  # the same message again: answered once
    if state.session.closing:
        raise ValueError(f"session {state.workflow_id} is closing; it takes no more messages")
    if turn_running(state) and session.message_policy == MessagePolicy.REJECT:
        raise ValueError(
            f"turn {state.session.turn_number} is running and this session's message policy is reject: "
            "ask again once it has answered"
        )


def accept(state: AgentState, message: PendingMessage) -> None:
    """A message for the session, placed by its policy (a repeated `ask` id is already placed)."""
    if message.id is not None and _digest_of(state, message.id) is not None:
        return
    session = policy(state)
    assert session is not None
    if not turn_running(state) or session.message_policy == MessagePolicy.QUEUE:
        state.session.queued.append(message)
    elif session.message_policy == MessagePolicy.JOIN:
        state.session.inbox.append(message)
    elif session.message_policy == MessagePolicy.INTERRUPT:
        state.session.queued.append(message.model_copy(update={"interrupt": True}))
    else:  # reject: an `ask` was refused by its validator; a `send` cannot be refused
        state.session.messages_rejected += 1


def joined(state: AgentState) -> None:
    """The turn in flight takes the messages that joined it (at a step boundary)."""
    if state.session.turns.items:
        for message in state.session.inbox:
            if message.id is not None:
                state.session.turns.items[-1].message_ids[message.id] = _digest(message.text)


async def ask(state: AgentState, request: AskRequest) -> TurnAnswer:
    """The `ask` update's body: the message placed, then (if asked to wait) its turn's answer."""
    accept(state, PendingMessage(text=request.text, id=request.message_id))
    if request.wait:
        await workflow.wait_condition(lambda: _settled(state, request.message_id))
    return answer_of(state, request.message_id)


def validate_answer(state: AgentState, message_id: str) -> None:
    """The `answer` update's validator: the message must be one the session holds."""
    if _where(state, message_id) is None:
        raise ValueError(
            f"no message {message_id!r} in this session (it holds the messages of its last {KEEP_TURNS} turns "
            "and those queued)"
        )


async def await_answer(state: AgentState, message_id: str) -> TurnAnswer:
    """The `answer` update's body: the answer to an earlier `ask`, once its turn has ended."""
    await workflow.wait_condition(lambda: _settled(state, message_id))
    return answer_of(state, message_id)


def answer_of(state: AgentState, message_id: str) -> TurnAnswer:
    where = _where(state, message_id)
    if isinstance(where, Turn):
        return TurnAnswer(
            message_id=message_id,
            turn=where.number,
            status=where.status,
            answer=where.answer,
            error=where.error,
            used=where.used if where.ended else None,
        )
    if state.release.moving:  # its turn runs on the session's new build: ask that run (ratchet.client does)
        return TurnAnswer(message_id=message_id, turn=None, status=None, moved=True)
    if where is None:  # a rollback removed its turn, or the session ended before it was answered
        why = f"the session ended {state.phase}" if state.phase.terminal else "a rollback removed its turn"
        return TurnAnswer(message_id=message_id, turn=None, status=None, error=state.last_error or why)
    if state.phase.terminal:  # still queued: the session ended before its turn
        why = f"the session ended {state.phase} before this message's turn"
        return TurnAnswer(
            message_id=message_id,
            turn=None,
            status=None,
            error=f"{why}: {state.last_error}" if state.last_error else why,
        )
    return TurnAnswer(message_id=message_id, turn=None, status=None)


def _settled(state: AgentState, message_id: str) -> bool:
    where = _where(state, message_id)
    settled = state.phase.terminal or where is None or (isinstance(where, Turn) and where.ended)
    return settled or state.release.moving


def _where(state: AgentState, message_id: str) -> Turn | PendingMessage | None:
    for turn in reversed(state.session.turns.items):
        if message_id in turn.message_ids:
            return turn
    return next((m for m in state.session.queued + state.session.inbox if m.id == message_id), None)


def _digest_of(state: AgentState, message_id: str) -> str | None:
    where = _where(state, message_id)
    if isinstance(where, Turn):
        return where.message_ids[message_id]
    return _digest(where.text) if where is not None else None


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:32]


# --- turns -----------------------------------------------------------------------------------------


def start(state: AgentState) -> None:
    """A new session: the objective is its first turn; messages sent before it started are placed
    by its policy."""
    open_first(state)
    early, state.session.inbox = state.session.inbox, []
    for message in early:
        accept(state, message)


def open_first(state: AgentState) -> None:
    """The session's first turn: its objective (the conversation's last message already)."""
    messages = state.conversation.messages.items
    messages[-1] = messages[-1].model_copy(update={"turn": state.session.turn_number + 1})
    state.session.turns.append(_turn(state, state.run.objective, None, state.conversation.count - 1))


def open_next(state: AgentState) -> None:
    """The next turn, for the first queued message (its user message joins the conversation)."""
    message = state.session.queued.pop(0)
    state.conversation.messages.append(Message(role="user", content=message.text, turn=state.session.turn_number + 1))
    state.session.turns.append(_turn(state, message.text, message.id, state.conversation.count - 1))


def _turn(state: AgentState, question: str, message_id: str | None, first_message: int) -> Turn:
    return Turn(
        number=state.session.turn_number + 1,
        question=question,
        message_ids={message_id: _digest(question)} if message_id is not None else {},
        started_at=workflow.now().isoformat(),
        first_message=first_message,
        first_step=state.step,
        before=_totals(state),
    )


async def turn_answered(state: AgentState, plan: RunPlan, answer: str) -> None:
    """The turn in flight answered: it ends (its checkpoint with the workspace's files, if it changed
    them: a fork or a failover from there restores them), and the context is compacted if due."""
    close_turn(state, TurnStatus.ANSWERED, answer)
    changed = any(e.workspace and e.turn == state.session.turn_number for e in state.effects.stack.items)
    if changed and state.workspace.host is not None:
        try:
            binding = await failover.open_on(state, plan, state.workspace.host)
        except HostLost:  # the next step fails over; this checkpoint keeps the conversation only
            binding = None
        if binding is not None:
            checkpoint = state.effects.checkpoints.items[-1]
            state.effects.replace_last_checkpoint(checkpoint.model_copy(update={"workspace_ref": binding.manifest_ref}))
    if compaction.due(state, plan):
        await compaction.compact(state, plan)


def close_turn(state: AgentState, status: TurnStatus, answer: str | None = None, error: str | None = None) -> None:
    """The turn in flight ends: its answer, what it spent, and its checkpoint (`turn-N`). Messages
    that joined it too late for the model to see them wait for the next turn, and none of the
    waiting ones interrupts the turns to come."""
    turn = state.session.turns.items[-1]
    turn.status, turn.answer, turn.error = status, answer, error
    turn.ended_at = workflow.now().isoformat()
    turn.used = spent(state, turn)
    release_waiting(state)
    state.effects.add_checkpoint(
        Checkpoint(
            id=f"turn-{turn.number}",
            step=state.step,
            turn=turn.number,
            created_at=turn.ended_at,
            effects_len=state.effects.count,
            messages_len=state.conversation.count,
            transcript=state.conversation.transcript,
            unsent=state.conversation.unsent,
            summary=f"end of turn {turn.number} ({status})",
        )
    )


def release_waiting(state: AgentState) -> None:
    """At a turn's end: the messages that joined it too late wait for the next turn, and a message
    interrupts only the turn it came during (those queued behind it wait for their own turns)."""
    waiting = state.session.inbox + state.session.queued
    state.session.queued = [m.model_copy(update={"interrupt": False}) for m in waiting]
    state.session.inbox.clear()


def spent(state: AgentState, turn: Turn) -> TurnUsed:
    now = _totals(state)
    return TurnUsed(
        steps=now.steps - turn.before.steps,
        tokens=now.tokens - turn.before.tokens,
        cost_usd=round(now.cost_usd - turn.before.cost_usd, 8),
    )


def turn_exhausted(state: AgentState) -> str | None:
    """Why the turn in flight may not take another step (its own budget), or None."""
    session = policy(state)
    if session is None or not turn_running(state):
        return None
    used = spent(state, state.session.turns.items[-1])
    if session.turn_max_steps is not None and used.steps >= session.turn_max_steps:
        return f"turn budget exhausted: {used.steps} of {session.turn_max_steps} steps used"
    if session.turn_max_tokens is not None and used.tokens >= session.turn_max_tokens:
        return f"turn budget exhausted: {used.tokens} of {session.turn_max_tokens} tokens used"
    return None


def turn_tokens_left(state: AgentState) -> int | None:
    """What the turn in flight may still spend in tokens (its own budget), or None: no such budget."""
    session = policy(state)
    if session is None or session.turn_max_tokens is None or not turn_running(state):
        return None
    return session.turn_max_tokens - spent(state, state.session.turns.items[-1]).tokens


def _totals(state: AgentState) -> TurnUsed:
    used = state.used
    return TurnUsed(steps=used.steps, tokens=used.prompt_tokens + used.completion_tokens, cost_usd=used.cost_usd)


def cut_to(state: AgentState, checkpoint: Checkpoint | None) -> list[int]:
    """A rollback took the conversation back to `checkpoint` (None: the start): the turns after
    it go, the checkpoint's own turn is as it was there. Returns the turns removed."""
    if policy(state) is None:
        return []
    turn = checkpoint.turn if checkpoint is not None else 0
    removed = [t.number for t in state.session.turns.items if t.number > turn]
    state.session.summaries_to(turn, whole=checkpoint is not None and checkpoint.id == f"turn-{turn}")
    state.session.turns.cut_at(turn)  # turn n is item n - 1
    if state.session.turns.items and state.session.turns.items[-1].number == turn and checkpoint is not None:
        if checkpoint.id != f"turn-{turn}":  # back to the middle of the turn: it runs on from there
            last = state.session.turns.items[-1]
            last.status, last.answer, last.error, last.ended_at = TurnStatus.RUNNING, None, None, None
    if checkpoint is None and policy(state) is not None:
        open_first(state)  # back to the start: the objective's turn again
        removed = [n for n in removed if n != 1]
    return removed


def trim(state: AgentState) -> None:
    """For a handover: only the latest `KEEP_TURNS` turns and their checkpoints stay."""
    turns = state.session.turns
    if len(turns.items) <= KEEP_TURNS:
        return
    turns.keep_last(KEEP_TURNS)
    first_step = turns.items[0].first_step
    records = state.calls.tool_calls  # the dropped turns' outputs are in the transcript
    state.calls.drop_records_before(
        next((i for i, r in enumerate(records.items) if r.step > first_step), len(records.items)) + records.base
    )
    checkpoints = state.effects.checkpoints
    keep_from = next((i for i, c in enumerate(checkpoints.items) if c.turn > turns.base), len(checkpoints.items))
    state.effects.drop_checkpoints_before(checkpoints.base + keep_from)
    state.session.keep_summaries_after(turns.base)


def close(state: AgentState) -> str:
    """The `close` update: the session ends once its turn in flight and the messages queued before
    are answered."""
    if policy(state) is None or state.phase.terminal:
        raise ValueError(f"run {state.workflow_id} is {state.phase}, not an open session")
    state.session.closing = True
    return f"closing after turn {state.session.turn_number + len(state.session.queued)}"


def waiting(state: AgentState) -> bool:
    """The session has something to do: a message to answer or a close to honour."""
    return bool(state.session.queued) or state.session.closing
