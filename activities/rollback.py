"""`rollback.load`: read a closed run for its rollback (`RollbackWorkflow`, workflows/closed_rollback.py).

The run is read through its `state` query: Temporal replays a closed run's history on a worker to
answer it, so this works as long as the history is retained. The state is trimmed to what a
rollback needs. Then the ledger says which undos already ran: a rollback of a closed run cannot
change the run's own state, so an effect whose `{key}/undo` entry is COMPLETED (undone by an
earlier rollback of the closed run) is marked undone here, and the plan shows it `already_undone`.
An effect whose call never reported gets the undo record the ledger holds for it (what its undo
would read anyway), so the plan can say what its undo does.
"""

from __future__ import annotations

import asyncio

from temporalio import activity
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowQueryFailedError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from ratchet.contracts.activities import ROLLBACK_LOAD
from ratchet.contracts import (
    AGENT_WORKFLOW,
    STATE_QUERY,
    AgentState,
    Checkpoint,
    ClosedRun,
    Effect,
    EffectStatus,
    ErrorType,
    LoadClosedRun,
    Message,
    ToolCallRecord,
    Window,
)
from .archive import load_archived
from ratchet.core.keys import undo_key
from ratchet.stores.artifacts import ArtifactStore
from ratchet.stores.ledger import EntryStatus, Ledger


class RollbackActivities:
    def __init__(self, client: Client | None, ledger: Ledger, artifacts: ArtifactStore) -> None:
        self.client = client
        self.ledger = ledger
        self.artifacts = artifacts

    @activity.defn(name=ROLLBACK_LOAD.name)
    async def load(self, req: LoadClosedRun) -> ClosedRun:
        """The closed run `req.workflow_id` (its latest run), ready to be rolled back. A run that is
        still open, or that is not an agent run, is the caller's mistake (non-retryable)."""
        assert self.client is not None, "rollback.load needs a Temporal client"
        handle = self.client.get_workflow_handle(req.workflow_id)
        try:
            described = await handle.describe()
        except RPCError as exc:
            if exc.status == RPCStatusCode.NOT_FOUND:
                raise _invalid(f"workflow_id: no run {req.workflow_id!r}") from None
            raise  # the server is unavailable: retried
        if described.workflow_type != AGENT_WORKFLOW:
            raise _invalid(f"workflow_id: {req.workflow_id!r} is a {described.workflow_type}, not an agent run")
        if described.status == WorkflowExecutionStatus.RUNNING:
            raise _invalid(
                f"run {req.workflow_id!r} is still running: roll it back with its `rollback` update "
                "(`ratchet rollback` does), at its next step boundary"
            )
        pinned = self.client.get_workflow_handle(req.workflow_id, run_id=described.run_id)
        try:
            state = await pinned.query(STATE_QUERY, result_type=AgentState)
        except WorkflowQueryFailedError as exc:
            raise _invalid(f"cannot read run {req.workflow_id!r}: {exc}") from None
        if state is not None:
            state = _trimmed(state)
            await asyncio.to_thread(self._restore_archived, state)
            await asyncio.to_thread(self._mark_from_ledger, state)
        status = described.status.name if described.status is not None else "UNKNOWN"
        return ClosedRun(run_id=described.run_id, status=status, state=state)

    def _restore_archived(self, state: AgentState) -> None:
        """In a thread: the effects a long run archived at its handovers, back in front of the rest."""
        if state.effects.archive is not None:
            state.effects.unarchive(load_archived(self.artifacts, state.effects.archive))

    def _mark_from_ledger(self, state: AgentState) -> None:
        """In a thread: undos the ledger has completed, and undo records of calls that never reported."""
        for effect in state.effects.stack.items:
            if effect.status != EffectStatus.UNDONE and _undone(self.ledger, effect.key):
                effect.status, effect.error = EffectStatus.UNDONE, None
            if effect.undo is None and effect.status != EffectStatus.UNDONE:
                forward = self.ledger.get(effect.key)
                effect.undo = forward.undo if forward is not None else None
            children = (effect.undo or {}).get("effects")
            if isinstance(children, list) and children:  # a sub-agent: its effects have their own keys
                for child in children:
                    if child.get("status") != EffectStatus.UNDONE and _undone(self.ledger, child.get("key", "")):
                        child["status"] = EffectStatus.UNDONE.value
                if all(Effect.model_validate(c).status == EffectStatus.UNDONE for c in children):
                    effect.status = EffectStatus.UNDONE


def _undone(ledger: Ledger, key: str) -> bool:
    entry = ledger.get(undo_key(key)) if key else None
    return entry is not None and entry.status == EntryStatus.COMPLETED


def _trimmed(state: AgentState) -> AgentState:
    """The state without what only grows and a rollback does not read: the conversation, tool call
    records, verification output, approvals and earlier reports. The run's model settings (a
    scripted run's script) and objective are dropped too; the plan and the effects stay whole."""
    effects, held = state.effects, state.effects.checkpoints
    checkpoints = [c.model_copy(update={"evidence": None, "messages": None}) for c in held.items]
    records = Window[ToolCallRecord](base=state.calls.tool_calls.base)
    return state.model_copy(
        update={
            "run": state.run.model_copy(update={"model": None, "objective": state.run.objective[:200]}),
            "conversation": state.conversation.model_copy(
                update={"messages": Window[Message](base=state.conversation.messages.base)}
            ),
            "calls": state.calls.model_copy(update={"tool_calls": records, "pending_approvals": [], "decisions": {}}),
            "session": state.session.model_copy(update={"inbox": []}),
            "effects": effects.model_copy(
                update={"rollbacks": [], "checkpoints": Window[Checkpoint](items=checkpoints, base=held.base)}
            ),
            "workspace": state.workspace.model_copy(update={"failovers": []}),
        }
    )


def _invalid(message: str) -> ApplicationError:
    return ApplicationError(message, type=ErrorType.INVALID_INPUT, non_retryable=True)
