"""One SQLite file shared by the stores in the ledger's database (the ledger, billing, memory),
written by one thread at a time in this process (read by any number at once).

The ledger, the billing ledger and memory each keep tables in the file at RATCHET_LEDGER_PATH. A
thread that finds the file's write lock taken by another connection waits in SQLite's busy handler,
which sleeps 1 to 100 ms between tries: at 20 concurrent runs a model call's billing row and the
next call's ledger `begin` met there on every step, and the threads slept while the machine idled.
`writer(path)` is the lock every writer of one file takes first, so a writer wakes as soon as the
one before it commits. Other processes still meet SQLite's own lock (and its busy handler).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

_WRITERS: dict[Path, threading.Lock] = {}
_GUARD = threading.Lock()

Query = Callable[[str, tuple[Any, ...]], list[tuple[Any, ...]]]
"""Run one statement in the open transaction: its rows ([] for a statement with none)."""


def writer(path: Path) -> threading.Lock:
    """The lock this process's writers of the SQLite file at `path` take (one per file)."""
    key = Path(path).resolve()
    with _GUARD:
        return _WRITERS.setdefault(key, threading.Lock())


def connect(path: Path) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit), WAL, each commit synced."""
    conn = sqlite3.connect(path, timeout=30, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    return conn


class SqliteDatabase:
    """A `Database` (ratchet/stores/memory.py) over the SQLite file at `path`: one connection per
    thread, kept open (a model call's billing row is one short transaction on the hot path), every
    transaction under the file's `writer` lock and `BEGIN IMMEDIATE`, which hold off every other
    writer: a transaction's named `lock` (Postgres's advisory lock) needs nothing more here. A
    `read` takes neither."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._writing = writer(self.path)

    def transaction(self, what: str, lock: str | None, fn: Callable[[Query], Any]) -> Any:
        db = self._db()
        with self._writing:
            db.execute("BEGIN IMMEDIATE")
            try:
                result = fn(lambda sql, params: db.execute(sql, params).fetchall())
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
        return result

    def read(self, what: str, fn: Callable[[Query], Any]) -> Any:
        """`fn`'s reads in one snapshot, without the writer lock: in WAL a reader neither waits for a
        writer (its commit's fsync included) nor holds one up."""
        db = self._db()
        db.execute("BEGIN")
        try:
            return fn(lambda sql, params: db.execute(sql, params).fetchall())
        finally:
            db.execute("COMMIT")

    def _db(self) -> sqlite3.Connection:
        db = getattr(self._local, "db", None)
        if db is None:
            db = self._local.db = connect(self.path)
        return db
