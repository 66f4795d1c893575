"""How a run fails, in the workflow's terms (deterministic, no I/O).

`FailRun` ends a run after its failure policy has been applied; `cause` unwraps Temporal's
activity and child-workflow wrappers to the message a person needs; `raise_if_cancelled` turns an
activity cancelled because the run was cancelled into the run's own cancellation.
"""

from __future__ import annotations

import asyncio

from temporalio.exceptions import ActivityError, ApplicationError, ChildWorkflowError, is_cancelled_exception

from ratchet.contracts import BudgetUsed, ErrorType
from ratchet.core import budget as budgets


class FailRun(Exception):
    """Raised in workflow code: the run ends FAILED once its failure policy has been applied.
    (`ratchet.client.RunFailed` is what a client sees of a run that ended so.) `error_type`: the
    run's failure's type (`AgentFailed`, or `GuardrailTripped`)."""

    def __init__(self, message: str, error_type: ErrorType = ErrorType.AGENT_FAILED) -> None:
        super().__init__(message)
        self.error_type = error_type


def root(err: BaseException) -> BaseException:
    """The first real failure under Temporal's Activity/ChildWorkflow wrappers."""
    while isinstance(err, (ActivityError, ChildWorkflowError)) and err.__cause__ is not None:
        err = err.__cause__
    return err


def cause(err: BaseException) -> str:
    """The message of the first real failure under Temporal's Activity/ChildWorkflow wrappers."""
    err = root(err)
    if isinstance(err, ApplicationError):
        return err.message
    return str(err) or type(err).__name__


def raise_if_cancelled(err: BaseException) -> None:
    """An activity or child cancelled because the run was cancelled is the run's cancellation,
    not a failure: it must take the cancellation path (compensate, end CANCELLED)."""
    if is_cancelled_exception(err):
        raise asyncio.CancelledError() from err


def invalid_input(err: BaseException) -> ApplicationError:
    """A start the worker cannot accept (unknown profile, missing fork source): fails the run at
    once, naming why."""
    return ApplicationError(cause(err), type=ErrorType.INVALID_INPUT, non_retryable=True)


def spend_failed(used: BudgetUsed, err: BaseException) -> None:
    """A model call that failed for good (`model.call`, `model.compact`, `guardrail.judge`): the
    attempts it billed, carried in its failure's details (activities/billing.py), count all the same."""
    failure = root(err)
    billed = budgets.billed_of(failure.details if isinstance(failure, ApplicationError) else None)
    if billed is not None:
        budgets.spend(used, billed)
