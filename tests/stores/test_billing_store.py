"""The billing ledger's store on both of its databases (SQLite and a real PostgreSQL server): an
attempt's row is written once, a call's attempts on one model add up, a run's rows include its
sub-agents' (and no other run's whose id merely starts alike)."""

from __future__ import annotations

import pytest

from ratchet.stores.billing import BillingRow, BillingStore


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.e2e)])
def store(request, tmp_path) -> BillingStore:
    if request.param == "sqlite":
        return BillingStore.sqlite(tmp_path / "ledger.sqlite3")
    return BillingStore.postgres(request.getfixturevalue("postgres_server").create_database())


def row(workflow_id: str, attempt: int, choice: int = 0, error: str = "", prompt: int = 100) -> BillingRow:
    return BillingRow(
        workflow_id=workflow_id,
        run_id="r1",
        call_key=f"{workflow_id}/1/model",
        choice=choice,
        attempt=attempt,
        step=1,
        cause="retry" if attempt > 1 else "answer",
        provider="openai",
        model="gpt-4o-mini",
        prompt_tokens=prompt,
        completion_tokens=10,
        cache_read_tokens=40,
        cache_write_tokens=0,
        cost_usd=0.5,
        estimated=attempt == 2,
        priced=True,
        error=error,
    )


def test_an_attempt_is_billed_once_and_a_calls_attempts_add_up(store: BillingStore):
    store.bill(row("run_1", 1, error="ModelHTTP500"))
    store.bill(row("run_1", 1, error="ModelHTTP500", prompt=999))  # the same attempt again: nothing changes
    store.bill(row("run_1", 2))
    store.bill(row("run_1", 1, choice=1))  # the fallback's attempts are its own
    billed = store.billed("r1", "run_1/1/model", 0)
    assert (billed.attempts, billed.prompt_tokens, billed.cache_read_tokens, billed.cost_usd) == (2, 200, 80, 1.0)
    assert billed.estimated and not billed.unpriced
    assert [(r.choice, r.attempt, r.error, r.estimated) for r in store.rows("run_1")] == [
        (0, 1, "ModelHTTP500", False),
        (0, 2, "", True),
        (1, 1, "", False),
    ]


def test_a_runs_rows_include_its_sub_agents_and_no_look_alike(store: BillingStore):
    store.bill(row("run_2", 1))
    store.bill(row("run_2/3/delegate_1/child", 1))
    store.bill(row("run_20", 1))  # another run whose id starts alike
    store.bill(row("run%2", 1))  # and one whose id would be a LIKE pattern
    assert sorted(r.workflow_id for r in store.rows("run_2")) == ["run_2", "run_2/3/delegate_1/child"]
