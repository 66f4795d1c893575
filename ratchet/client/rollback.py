"""Rolling a run back, running or closed, through one call (`RunHandle.rollback`, `rollback_plan`).

A running run rolls back through its `rollback` update; a closed one (DONE, FAILED, cancelled, ...)
through a `RollbackWorkflow` (workflows/closed_rollback.py) under the id derived from the request,
so a rollback that completed before is not run again. A run that closes while the request is on its
way is rolled back as a closed run. A plan lists the effects a long run archived one by one, read
from the artifact store (ratchet/stores/archived_effects.py) as the rollback itself loads them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Literal

from pydantic import BaseModel, Field, ValidationError
from temporalio.client import WorkflowFailureError
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError

from ratchet.client.errors import (
    InvalidInput,
    RatchetError,
    Refused,
    RunClosed,
    RunFailed,
    RunNotFound,
    failure_reason,
    rpc_error,
)
from ratchet.client.rpc import RunCalls
from ratchet.contracts import (
    ROLLBACK_WORKFLOW,
    AgentState,
    ClosedRollback,
    RollbackPlanItem,
    RollbackReport,
    RollbackRequest,
    RollbackRun,
    RunMessages,
    rollback_id,
)
from ratchet.contracts.decisions import DecisionProof
from ratchet.contracts.rollback_plan import plan_of
from ratchet.ops.settings import Settings
from ratchet.stores.archived_effects import load_archived
from ratchet.stores.urls import open_artifacts


class RollbackOutcome(BaseModel):
    """What a rollback did (or, as a dry run, would do)."""

    workflow_id: str
    checkpoint_id: str
    running: bool
    """The run was running: its `rollback` update did it. Else a `RollbackWorkflow` did (`closed`)."""
    plan: list[RollbackPlanItem]
    report: RollbackReport | None = None
    """What was undone (None: a dry run, or a closed run's dry run)."""
    closed: ClosedRollback | None = None
    rollback_workflow_id: str | None = None
    earlier: bool = False
    """A closed run was rolled back to this checkpoint before: this is that rollback's result."""
    closed_meanwhile: bool = False
    """The run closed while the request was on its way: it was rolled back as a closed run."""
    turns_removed: list[int] = Field(default_factory=list)
    """A running session's turns the rollback takes out of the conversation (or, as a dry run,
    would): those after the checkpoint's turn, newest last."""

    @property
    def clean(self) -> bool:
        return self.report is None or self.report.clean

    @property
    def complete(self) -> bool:
        """Everything the rollback was asked to undo is undone (nothing irreversible left, no undo
        failed); a dry run is complete."""
        return self.report is None or (self.report.clean and not self.report.irreversible)

    def summary(self) -> str:
        """One line: how many effects were undone, how many stay done and why."""
        report = self.report
        turns = f"; turns removed: {', '.join(map(str, self.turns_removed))}" if self.turns_removed else ""
        if report is None:
            return f"dry run: {sum(1 for item in self.plan if item.action == 'undo')} to undo, nothing changed{turns}"
        parts = [f"undone {len(report.undone)}"]
        if report.irreversible:
            parts.append(f"left in place {len(report.irreversible)} (irreversible: {', '.join(report.irreversible)})")
        if report.not_undone:
            parts.append(f"not undone {len(report.not_undone)} ({'; '.join(report.errors) or 'the undo failed'})")
        return "; ".join(parts) + turns


class Rollbacks:
    """The rollbacks of one run: `calls` reach it, `state` reads its state (NotStartedYet before
    its first task), `settings` name the task queue and the artifact store."""

    def __init__(self, calls: RunCalls, settings: Settings, state: Callable[[], Awaitable[AgentState]]) -> None:
        self.calls, self.settings, self.state = calls, settings, state
        self.workflow_id = calls.workflow_id

    async def plan(self, checkpoint_id: str) -> list[RollbackPlanItem]:
        """What a rollback to the checkpoint would undo, newest first, archived effects included."""
        if await self.calls.running():
            try:
                return await self._running_plan(checkpoint_id)
            except RunClosed:
                pass
            except (RunNotFound, Refused):
                raise
            except RatchetError:
                if await self.calls.running():
                    raise
        return (await self._closed(checkpoint_id, dry_run=True)).plan

    async def roll_back(
        self,
        checkpoint_id: str,
        then: Literal["continue", "stop", "rerun"] | None,
        dry_run: bool,
        proof: DecisionProof | None = None,
    ) -> RollbackOutcome:
        """Undo the effects after `checkpoint_id` (see `RunHandle.rollback`); `proof`: who asks, signed."""
        try:
            request = RollbackRequest(checkpoint_id=checkpoint_id, then=then or "continue", proof=proof)
        except ValidationError as exc:
            raise InvalidInput.of("rollback", exc) from None
        if await self.calls.running():
            try:
                return await self._running(request, dry_run)
            except RunClosed:
                outcome = await self._closed(checkpoint_id, dry_run)
                return outcome.model_copy(update={"closed_meanwhile": True})
            except (RunNotFound, Refused):
                raise
            except RatchetError:
                if await self.calls.running():
                    raise
                outcome = await self._closed(checkpoint_id, dry_run)
                return outcome.model_copy(update={"closed_meanwhile": True})
        return await self._closed(checkpoint_id, dry_run)

    async def _running(self, request: RollbackRequest, dry_run: bool) -> RollbackOutcome:
        """The running run's rollback, by its `rollback` update (a dry run: its plan only)."""
        checkpoint_id = request.checkpoint_id
        plan = await self._running_plan(checkpoint_id)
        if dry_run:
            turns = turns_after(await self.state(), checkpoint_id)
            return RollbackOutcome(
                workflow_id=self.workflow_id, checkpoint_id=checkpoint_id, running=True, plan=plan, turns_removed=turns
            )
        report = await self.calls.update(RunMessages.ROLLBACK, request, RollbackReport)
        return RollbackOutcome(
            workflow_id=self.workflow_id,
            checkpoint_id=checkpoint_id,
            running=True,
            plan=plan,
            report=report,
            turns_removed=report.turns_removed,
        )

    async def _running_plan(self, checkpoint_id: str) -> list[RollbackPlanItem]:
        plan = await self.calls.query(
            RunMessages.ROLLBACK_PLAN, checkpoint_id, result_type=list[RollbackPlanItem], what="rollback"
        )
        if any(item.action == "archived" for item in plan):
            plan = await self._with_archived(checkpoint_id)
        return plan

    async def _with_archived(self, checkpoint_id: str) -> list[RollbackPlanItem]:
        """The plan with the effects a long run archived listed one by one, read from the artifact
        store (workflows/effects_archive.py), as the rollback itself will load them."""
        state = await self.state()
        store = open_artifacts(self.settings.artifact_store_url)
        state.effects.unarchive(await asyncio.to_thread(load_archived, store, state.effects.archive))
        if state.plan is None:  # the run failed while being planned: it never acted
            return []
        try:
            return plan_of(state, checkpoint_id)
        except ValueError as exc:
            raise Refused("rollback", str(exc)) from None

    async def _closed(self, checkpoint_id: str, dry_run: bool) -> RollbackOutcome:
        """Start (or join) the closed run's RollbackWorkflow under the id derived from the request."""
        try:
            request = RollbackRun(workflow_id=self.workflow_id, checkpoint_id=checkpoint_id, dry_run=dry_run)
        except ValidationError as exc:
            raise InvalidInput.of("rollback", exc) from None
        rollback_workflow = rollback_id(request.workflow_id, request.checkpoint_id, request.dry_run)
        reuse = WorkflowIDReusePolicy.ALLOW_DUPLICATE if dry_run else WorkflowIDReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY
        earlier = False
        temporal, doing = self.calls.temporal, f"cannot roll back {self.workflow_id}"
        try:
            handle = await temporal.start_workflow(
                ROLLBACK_WORKFLOW,
                request,
                id=rollback_workflow,
                task_queue=self.settings.task_queue,
                result_type=ClosedRollback,
                id_reuse_policy=reuse,
                id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            )
        except WorkflowAlreadyStartedError:
            handle, earlier = temporal.get_workflow_handle(rollback_workflow, result_type=ClosedRollback), True
        except RPCError as exc:
            raise rpc_error(doing, exc, self.calls.address) from None
        try:
            closed = await handle.result()
        except RPCError as exc:
            raise rpc_error(doing, exc, self.calls.address) from None
        except WorkflowFailureError as exc:
            raise RunFailed(rollback_workflow, failure_reason(exc.cause)) from None
        return RollbackOutcome(
            workflow_id=self.workflow_id,
            checkpoint_id=checkpoint_id,
            running=False,
            plan=closed.plan,
            report=closed.report,
            closed=closed,
            rollback_workflow_id=rollback_workflow,
            earlier=earlier,
        )


def turns_after(state: AgentState, checkpoint_id: str) -> list[int]:
    """A session's turns after the checkpoint's (what a rollback to it removes)."""
    checkpoint = next((c for c in state.effects.checkpoints.items if c.id == checkpoint_id), None)
    turn = checkpoint.turn if checkpoint is not None else 0
    return [t.number for t in state.session.turns.items if t.number > turn and not (turn == 0 and t.number == 1)]
