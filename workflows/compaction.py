"""Compaction: a session's context kept within its budget over any number of turns (deterministic,
no I/O).

At a turn boundary, once the last model call's context (prompt and reply) passed the session's
`compact_after_tokens`, one summarising model call (activity `model.compact`, its own idempotency
key `{workflow id}/{step}/compact`) writes a summary of the conversation so far into the
transcript; from there on the model sees the system prompt, the objective, the summary and the
turns after it. The transcript keeps every message (`ratchet transcript` shows the summary where it
was made); the turn's checkpoint includes the summary, and a rollback to a checkpoint before it
takes the model back to the conversation as it was then.
"""

from __future__ import annotations

from temporalio.exceptions import ActivityError

from ratchet.contracts import AgentState, CompactRequest, RunPlan
from ratchet.contracts.activities import COMPACT
from ratchet.core import budget as budgets
from . import calls
from .errors import cause, raise_if_cancelled, spend_failed


def due(state: AgentState, plan: RunPlan) -> bool:
    session = plan.session
    threshold = session.compact_after_tokens if session is not None else None
    conversation = state.conversation
    return threshold is not None and conversation.transcript is not None and conversation.context_tokens >= threshold


async def compact(state: AgentState, plan: RunPlan) -> None:
    """Summarise the turns so far; the summary joins the conversation (and the turn's checkpoint)."""
    first, last = state.session.compacted_to + 1, state.session.turn_number
    assert state.conversation.transcript is not None
    turns = f"{first}-{last}" if first < last else str(last)
    try:
        reply = await calls.call(
            COMPACT,
            CompactRequest(
                step=state.step, call_ref=plan.call_ref, transcript=state.conversation.transcript, turns=turns
            ),
            summary=f"turn {last}: compact turns {turns} ({state.conversation.context_tokens} tokens)",
            start_to_close_s=plan.model.timeout_s + 30,
            task_queue=plan.model.task_queue,
        )
    except ActivityError as err:  # the session goes on uncompacted; the next turn boundary tries again
        raise_if_cancelled(err)
        spend_failed(state.used, err)  # a failed compaction's attempts were paid for all the same
        state.last_error, state.conversation.context_tokens = f"turn {last}: compaction failed: {cause(err)}", 0
        return
    budgets.charge(state.used, reply.usage, plan.model, reply.billed)
    conversation, session = state.conversation, state.session
    conversation.messages.append(reply.message)
    conversation.seen(reply.transcript)
    conversation.context_tokens = 0
    session.summarised(last)
    checkpoint = state.effects.last_checkpoint
    if checkpoint is not None and checkpoint.id == f"turn-{last}":  # the turn ends with its summary
        update = {
            "messages_len": conversation.count,
            "transcript": conversation.transcript,
            "unsent": conversation.unsent,
        }
        state.effects.replace_last_checkpoint(checkpoint.model_copy(update=update))
