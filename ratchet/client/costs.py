"""What a run cost (`RunHandle.cost`, `ratchet cost ID`): its billing ledger rows and its
sub-agents' (ratchet/stores/billing.py), by step and cause, read from the ledger's database."""

from __future__ import annotations

from pydantic import BaseModel, Field

from ratchet.contracts import Billed
from ratchet.ops.settings import Settings
from ratchet.stores.billing import BillingRow, BillingStore, Cause


class CostLine(BaseModel):
    """The attempts of one step, cause and model."""

    step: int
    """The run's step (a sub-agent's rows: the parent's step that delegated)."""
    cause: str
    provider: str
    model: str
    billed: Billed
    failed: int = 0
    """Of `billed.attempts`, those that failed."""


class CostReport(BaseModel):
    workflow_id: str
    total: Billed
    lines: list[CostLine] = Field(default_factory=list)
    by_cause: dict[str, Billed] = Field(default_factory=dict)
    unpriced: list[str] = Field(default_factory=list)
    """`provider/model` of the models without a price: the total counts them as $0."""


def report(settings: Settings, workflow_id: str) -> CostReport:
    """The run's cost report (blocking: the caller runs it in a thread)."""
    rows = BillingStore.open(settings.ledger_store_url).rows(workflow_id)
    lines: dict[tuple[int, str, str, str], CostLine] = {}
    total, by_cause = Billed(), dict[str, Billed]()
    for row in rows:
        step, cause = _as_parent_sees(workflow_id, row)
        line = lines.setdefault(
            (step, cause, row.provider, row.model),
            CostLine(step=step, cause=cause, provider=row.provider, model=row.model, billed=Billed()),
        )
        line.billed = line.billed.add(row.billed())
        line.failed += bool(row.error)
        total = total.add(row.billed())
        by_cause[cause] = by_cause.get(cause, Billed()).add(row.billed())
    unpriced = sorted({f"{r.provider}/{r.model}" for r in rows if not r.priced})
    ordered = sorted(lines.values(), key=lambda x: (x.step, x.cause))
    return CostReport(workflow_id=workflow_id, total=total, lines=ordered, by_cause=by_cause, unpriced=unpriced)


def _as_parent_sees(workflow_id: str, row: BillingRow) -> tuple[int, str]:
    """A row's step and cause in the run's report: a sub-agent's (its id is
    `{run}/{step}/{call}/child`) under the run's step that delegated, as `sub-agent`."""
    if row.workflow_id == workflow_id:
        return row.step, row.cause
    step = row.workflow_id[len(workflow_id) + 1 :].split("/", 1)[0]
    return (int(step) if step.isdigit() else row.step), Cause.SUB_AGENT
