"""Ledger conformance: any Ledger implementation (SQLite today, Postgres later) must pass these."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

from ratchet.stores.ledger import EntryStatus, SqliteLedger


@pytest.fixture(params=["sqlite"])
def ledger(request, tmp_path: Path):
    return SqliteLedger(tmp_path / "ledger.sqlite3")


def test_begin_is_none_the_first_time_then_reports_the_entry(ledger):
    assert ledger.begin("wf/1/a") is None
    entry = ledger.begin("wf/1/a")
    assert entry.status == EntryStatus.STARTED and entry.starts == 1
    assert ledger.get("wf/1/a").starts == 2


def test_complete_records_the_result_and_begin_returns_it(ledger):
    ledger.begin("k")
    ledger.complete("k", {"ok": True, "output": "done"})
    entry = ledger.begin("k")
    assert entry.status == EntryStatus.COMPLETED and entry.result == {"ok": True, "output": "done"}


def test_the_first_undo_record_wins(ledger):
    ledger.begin("k")
    ledger.set_undo("k", {"previous": "before the first attempt"})
    ledger.set_undo("k", {"previous": "what the first attempt wrote"})
    assert ledger.get("k").undo == {"previous": "before the first attempt"}


def test_unknown_key_is_none(ledger):
    assert ledger.get("nope") is None


def test_keys_by_prefix_treat_like_wildcards_literally(ledger):
    for key in ("wf_1/1/a", "wf_1/1/a/undo", "wfX1/1/a"):
        ledger.begin(key)
    assert [e.key for e in ledger.keys("wf_1/")] == ["wf_1/1/a", "wf_1/1/a/undo"]


def _race(path: str, key: str, queue) -> None:
    queue.put(SqliteLedger(Path(path)).begin(key) is None)


def test_one_winner_when_processes_race_for_a_key(tmp_path: Path):
    path = str(tmp_path / "shared.sqlite3")
    SqliteLedger(Path(path))
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_race, args=(path, "race/1/x", queue)) for _ in range(4)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(30)
    winners = [queue.get(timeout=5) for _ in procs]
    assert winners.count(True) == 1


def test_a_reused_workflow_id_sets_the_earlier_chains_entries_aside(ledger):
    assert ledger.claim("wf", "chain-1") is None
    ledger.begin("wf/1/model")
    ledger.complete("wf/1/model", {"reply": "old"})
    ledger.begin("wf-other/1/model")
    assert ledger.claim("wf", "chain-1") is None, "the same chain claiming again (a retry) changes nothing"
    assert ledger.get("wf/1/model").status == EntryStatus.COMPLETED
    assert ledger.claim("wf", "chain-2") == "chain-1"
    assert ledger.get("wf/1/model") is None and ledger.begin("wf/1/model") is None
    archived = ledger.get("#chain-1#wf/1/model")
    assert archived.result == {"reply": "old"}
    assert ledger.get("wf-other/1/model") is not None, "another workflow id's entries stay"


def test_entries_from_before_claims_belong_to_an_earlier_chain(ledger):
    ledger.begin("wf_%/1/call")  # LIKE wildcards in the id are literal
    ledger.begin("wfX%/1/call")
    assert ledger.claim("wf_%", "chain-1") is None
    assert ledger.get("wf_%/1/call") is None and ledger.get("#unclaimed#wf_%/1/call") is not None
    assert ledger.get("wfX%/1/call") is not None


def test_a_claim_leaves_ids_that_differ_only_in_case_alone(ledger):
    """Temporal ids are case-sensitive; SQLite's LIKE is not."""
    ledger.begin("Fix-Bug/1/model")
    ledger.complete("Fix-Bug/1/model", {"reply": "theirs"})
    assert ledger.claim("fix-bug", "chain-1") is None
    assert ledger.get("Fix-Bug/1/model").result == {"reply": "theirs"}
    assert [e.key for e in ledger.keys("fix-bug/")] == []
