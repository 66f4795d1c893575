"""The run an activity works for: every Ratchet activity is a step of a workflow."""

from __future__ import annotations

from temporalio import activity
from temporalio.exceptions import ApplicationError

from ratchet.contracts import ErrorType


def workflow_id() -> str:
    """The id of the workflow that scheduled the running activity. One started on its own (a
    standalone activity, which has no workflow) is refused: it has no run to key its effects by."""
    info = activity.info()
    if info.workflow_id is None:
        raise ApplicationError(
            f"activity {info.activity_type} runs only as a step of a Ratchet run, not on its own",
            type=ErrorType.INVALID_INPUT,
            non_retryable=True,
        )
    return info.workflow_id
