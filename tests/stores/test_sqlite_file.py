"""The stores sharing the ledger's SQLite file write one at a time in a process
(ratchet/stores/sqlite_file.py): a ledger write and a billing row never meet in SQLite's lock."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from ratchet.stores import sqlite_file
from ratchet.stores.billing import BillingRow, BillingStore
from ratchet.stores.ledger import SqliteLedger


def test_ledger_and_billing_writers_in_many_threads_never_find_the_file_locked(tmp_path, monkeypatch):
    """With SQLite's busy timeout at 0, a writer that found another connection's write lock would
    fail at once ("database is locked"); sharing the file's writer lock, none does."""
    connect = sqlite_file.connect

    def impatient(path: Path):
        conn = connect(path)
        conn.execute("PRAGMA busy_timeout=0")
        return conn

    monkeypatch.setattr(sqlite_file, "connect", impatient)
    path = tmp_path / "ledger.sqlite3"
    ledger, billing = SqliteLedger(path), BillingStore.sqlite(path)
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            for i in range(40):
                key = f"run-{n}/{i}"
                ledger.begin(key)
                billing.bill(
                    BillingRow("run", f"r{n}", key, 0, 1, i, "answer", "scripted", "m", 1, 1, 0, 0, 0.0, False, True)
                )
                ledger.complete(key, {"i": i})
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors[:3]
    assert len(billing.rows("run")) == 6 * 40
    assert all(ledger.get(f"run-{n}/39") is not None for n in range(6))


@pytest.mark.parametrize("spelled", ["ledger.sqlite3", "./ledger.sqlite3"])
def test_one_lock_per_file_however_its_path_is_spelled(tmp_path, monkeypatch, spelled):
    monkeypatch.chdir(tmp_path)
    assert sqlite_file.writer(Path(spelled)) is sqlite_file.writer(tmp_path / "ledger.sqlite3")


def test_a_read_waits_for_no_writer(tmp_path):
    """A billing total or a run's rows read while another thread writes (its commit's fsync under
    the file's writer lock) are read at once, from the last commit: a reader takes no write lock."""
    path = tmp_path / "ledger.sqlite3"
    billing = BillingStore.sqlite(path)
    billing.bill(BillingRow("run", "r", "run/1/model", 0, 1, 1, "answer", "scripted", "m", 1, 1, 0, 0, 0.5, False, True))
    read: list[int] = []
    with sqlite_file.writer(path):  # a writer in this process, mid-commit
        reader = threading.Thread(target=lambda: read.append(len(billing.rows("run"))))
        reader.start()
        reader.join(timeout=10)
        assert not reader.is_alive(), "the read waited for the writer"
    assert read == [1]
