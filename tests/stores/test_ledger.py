"""SqliteLedger: the Ledger conformance suite (ratchet/testing/stores.py), then what only SQLite has."""

from __future__ import annotations

import sqlite3
from functools import partial
from pathlib import Path

import pytest

from ratchet.stores.ledger import EntryStatus, SqliteLedger
from ratchet.testing.stores import LedgerConformance


@pytest.mark.parametrize("check", LedgerConformance.checks())
def test_conformance(check: str, tmp_path: Path):
    LedgerConformance(partial(SqliteLedger, tmp_path / "ledger.sqlite3")).run(check)


def test_the_database_is_in_wal_mode_with_full_sync(tmp_path: Path):
    """Several worker processes on one host share the file: WAL lets readers run beside a writer."""
    ledger = SqliteLedger(tmp_path / "ledger.sqlite3")
    ledger.begin("wf/1/a")
    with sqlite3.connect(tmp_path / "ledger.sqlite3") as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert ledger._conn().execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL


def test_the_file_and_its_directory_are_created_and_an_existing_file_is_kept(tmp_path: Path):
    """The tables are created if absent, never dropped: opening an existing file keeps its entries."""
    path = tmp_path / "deep" / "dir" / "ledger.sqlite3"
    first = SqliteLedger(path)
    first.begin("wf/1/a")
    first.complete("wf/1/a", {"ok": True})
    reopened = SqliteLedger(path)
    assert reopened.get("wf/1/a").status == EntryStatus.COMPLETED and reopened.get("wf/1/a").result == {"ok": True}
