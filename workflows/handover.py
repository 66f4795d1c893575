"""What a run hands to its continuation: the state, minus what only grows and is kept elsewhere.

Carrying the whole `AgentState` made the continue-as-new input grow with every step (a 5,000-step
run: 741 KiB -> 2.6 MiB, bench/results/latest.md), and every worker holding the run held it all.
Kept elsewhere, so dropped here:

- messages the model has already seen, up to the last checkpoint (its unsent messages stay): they
  are in the transcript artifact (`transcript`); a rollback to an older checkpoint reads its
  messages back from there (`rollback.rewind`, activity `transcript.messages`);
- tool call records but the last `KEEP_TOOL_CALLS`: their outputs are in the transcript, their
  side effects in `effects`;
- effects below the last checkpoint: they went to the artifact store just before
  (workflows/effects_archive.py); a rollback below that checkpoint loads them back.

The run input itself (`run`, with a scripted model's script) is kept as it came: it does not grow.
"""

from __future__ import annotations

from collections.abc import Callable

from temporalio import workflow

from ratchet.contracts import AgentState, Continuation, RunPlan, Transcript, TranscriptPage
from . import effects_archive, inbox, saga, sessions
from .events import RunStream


KEEP_TOOL_CALLS = 50


def trimmed(state: AgentState) -> AgentState:
    sessions.trim(state)
    keep_from = min([state.conversation.unsent] + [c.unsent for c in state.effects.checkpoints.items[-1:]])
    state.conversation.messages.drop_before(keep_from)
    records = state.calls.tool_calls
    if len(records.items) > KEEP_TOOL_CALLS:
        state.calls.drop_records_before(records.end - KEEP_TOOL_CALLS)
    return state


def due(plan: RunPlan) -> bool:
    """Time to continue as new: the server suggests it, or the history reached the plan's limit."""
    info = workflow.info()
    return info.is_continue_as_new_suggested() or info.get_current_history_length() >= plan.continue_as_new_events


def page(state: AgentState, page: TranscriptPage) -> Transcript:
    """A page of the conversation (the `transcript` query): `Conversation.page`."""
    return state.conversation.page(page.offset, page.limit)


async def hand_over(
    state: AgentState, plan: RunPlan, stream: RunStream, interrupted: Callable[[], bool], upgrade: bool = False
) -> None:
    """Continue as new once every handler has finished (the stream's readers released first: their
    long polls are handlers too): messages delivered, older effects archived, the trimmed state and
    the stream handed over. `upgrade`: the next run starts on the worker deployment's build for
    this run (Upgrade-on-Continue-as-New; workflows/upgrades.py), else on this one. Returns only if
    `interrupted()` turned true first (a rollback's handler waits for the loop: it is served first)."""
    stream.detach()
    await workflow.wait_condition(lambda: workflow.all_handlers_finished() or interrupted())
    if interrupted():
        return
    inbox.deliver(state)
    await effects_archive.archive(state, lambda effect: saga.undoable(plan, effect))
    # a handler may have come in while the effects were archived (a session's next message)
    await workflow.wait_condition(lambda: workflow.all_handlers_finished() or interrupted())
    if interrupted():
        return
    upgrade = upgrade and workflow.info().get_current_deployment_version() is not None  # versioned workers only
    handed = stream.handover(state)
    await stream.notifier.settled()  # the webhooks' deliveries it started are in the history
    workflow.continue_as_new(
        Continuation(continuation=trimmed(state), stream=handed),
        initial_versioning_behavior=workflow.ContinueAsNewVersioningBehavior.AUTO_UPGRADE if upgrade else None,
    )
