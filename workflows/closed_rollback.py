"""RollbackWorkflow: undo what a closed run left in place (deterministic, no I/O).

A run that is still open rolls back through its `rollback` update. Once it has closed (DONE,
FAILED, BUDGET_EXHAUSTED, CANCELLED, terminated, timed out) it takes no updates, so this workflow
does the rollback instead, and its history is the audit trail:

    rollback.load   the closed run's state, by query (activities/rollback.py); effects the
                    ledger shows undone by an earlier rollback are marked undone
    plan            saga.rollback_plan over the effects after the checkpoint (`start`: all)
    undo            saga.compensate: newest first, each as `undo.<tool>` under the ledger key
                    the live rollback uses (`{key}/undo`, at most once), stopping at the first
                    undo that fails

A dry run (`dry_run: true`) stops after the plan: the dry run and the rollback take one path, so
they agree. The workflow id must be `rollback_id(...)` (`{run}/rollback/{checkpoint}`): a second
request for the same rollback is then the same workflow, not a second one racing the first.
"""

from __future__ import annotations

from pydantic import ValidationError
from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import ActivityError, ApplicationError

from ratchet.contracts import (
    ROLLBACK_WORKFLOW,
    ClosedRollback,
    ClosedRun,
    ErrorType,
    LoadClosedRun,
    RollbackReport,
    RollbackRun,
    rollback_id,
)
from ratchet.contracts.activities import ROLLBACK_LOAD
from . import calls, rollback, saga
from .errors import invalid_input, raise_if_cancelled
from .hosts import HostLost
from .input import decoded, describe, invalid

EXAMPLE = '{"workflow_id": "fix-42", "checkpoint_id": "cp-1"}'


@workflow.defn(name=ROLLBACK_WORKFLOW, sandboxed=False)  # outside the SDK's sandbox, as AgentWorkflow
class RollbackWorkflow:
    @workflow.run
    async def run(self, raw: RawValue = None) -> ClosedRollback:  # type: ignore[assignment]  # None: no input
        request = parse_rollback(raw)
        closed = await _load(request)
        state = closed.state
        result = ClosedRollback(
            workflow_id=request.workflow_id,
            run_id=closed.run_id,
            status=closed.status,
            phase=state.phase if state else None,
            checkpoint_id=request.checkpoint_id,
            dry_run=request.dry_run,
        )
        if state is None or state.plan is None:
            return result  # it failed before it was planned: it did nothing
        try:
            since = rollback.resolve(state, request.checkpoint_id).since
        except ValueError as exc:
            raise invalid(f"checkpoint_id: {exc}") from None
        result.plan = saga.rollback_plan(state, state.plan, since)
        if request.dry_run:
            return result
        reason = f"rollback of closed run {request.workflow_id} ({closed.status}, {state.phase})"
        result.report = report = RollbackReport(checkpoint_id=request.checkpoint_id, reason=reason)
        try:
            await saga.compensate(state, state.plan, since, report)
        except HostLost as lost:  # the closed run's workspace host is gone: nothing here can restore it
            report.errors.append(str(lost))
        if not result.report.clean:
            raise ApplicationError(
                f"rollback did not complete: {'; '.join(result.report.errors)}; not undone: "
                f"{'; '.join(result.report.not_undone)}; undone: {len(result.report.undone)}",
                result.model_dump(mode="json"),
                type=ErrorType.UNDO_FAILED,
                non_retryable=True,
            )
        return result


def parse_rollback(raw: RawValue | None) -> RollbackRun:
    """The input as a `RollbackRun`, under the id it implies, or a non-retryable `InvalidInput`."""
    value = decoded(raw, EXAMPLE, "rollback")
    try:
        request = RollbackRun.model_validate(value)
    except ValidationError as exc:
        raise invalid("invalid input: " + describe(exc)) from None
    expected = rollback_id(request.workflow_id, request.checkpoint_id, request.dry_run)
    if workflow.info().workflow_id != expected:
        raise invalid(f"start this rollback with workflow id {expected!r} (a second request is then the same workflow)")
    return request


async def _load(request: RollbackRun) -> ClosedRun:
    try:
        return await calls.call(
            ROLLBACK_LOAD, LoadClosedRun(workflow_id=request.workflow_id), summary=f"load {request.workflow_id}"
        )
    except ActivityError as err:
        raise_if_cancelled(err)
        raise invalid_input(err) from None
