"""Rolling back a closed run (`RollbackWorkflow`, workflows/closed_rollback.py): its input, what it
reads from the run, its result.

A run that is still open rolls back through its own `rollback` update. A closed one (DONE, FAILED,
BUDGET_EXHAUSTED, CANCELLED, terminated, timed out) cannot take updates any more: a
`RollbackWorkflow` undoes its effects instead, under the id `rollback_id` derives from the run's,
so a second request for the same rollback is the same workflow.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from ratchet.contracts.base import Phase, Strict
from ratchet.contracts.records import RollbackPlanItem, RollbackReport
from ratchet.contracts.state import AgentState

ROLLBACK_WORKFLOW = "RollbackWorkflow"
"""The workflow type of a closed run's rollback: `temporal workflow start --type RollbackWorkflow`."""
TO_START = "start"
"""The `checkpoint_id` that undoes every effect of the run, not only those after a checkpoint."""


def rollback_id(workflow_id: str, checkpoint_id: str, dry_run: bool = False) -> str:
    """The workflow id of the rollback of run `workflow_id` to `checkpoint_id`:
    `{workflow_id}/rollback/{checkpoint_id}`, and `.../dry-run` for its dry run. A
    `RollbackWorkflow` refuses to run under any other id."""
    base = f"{workflow_id}/rollback/{checkpoint_id}"
    return f"{base}/dry-run" if dry_run else base


class RollbackRun(Strict):
    """The input of `RollbackWorkflow`: `--input '{"workflow_id": "fix-42", "checkpoint_id": "cp-1"}'`."""

    workflow_id: str = Field(min_length=1, max_length=1000, description="The closed run to roll back.")
    checkpoint_id: str = Field(
        min_length=1,
        max_length=100,
        description=f"Undo the effects after this checkpoint of the run; `{TO_START}`: every effect.",
    )
    dry_run: bool = Field(False, description="Only list what the rollback would undo.")


class LoadClosedRun(BaseModel):
    """The input of `rollback.load`."""

    workflow_id: str


class ClosedRun(BaseModel):
    """What `rollback.load` read from a closed run."""

    run_id: str
    status: str
    """How Temporal closed it: COMPLETED, FAILED, CANCELED, TERMINATED, TIMED_OUT, CONTINUED_AS_NEW."""
    state: AgentState | None
    """Its state as it ended, without what a rollback does not need (conversation, tool call
    records, verification output, script); effects whose undo the ledger has completed (an earlier
    rollback of the closed run) marked undone. None: the run failed before it had a state."""


class ClosedRollback(BaseModel):
    """The result of `RollbackWorkflow`."""

    workflow_id: str
    """The run rolled back."""
    run_id: str
    status: str
    """How Temporal closed that run."""
    phase: Phase | None
    """The phase the run ended in (None: it failed before it had a state)."""
    checkpoint_id: str
    dry_run: bool = False
    plan: list[RollbackPlanItem] = Field(default_factory=list)
    """The effects after the checkpoint, newest first: what each undo does and whether it runs
    (`undo`), ran before (`already_undone`) or cannot (`irreversible`)."""
    report: RollbackReport | None = None
    """What this rollback undid (None in a dry run)."""
