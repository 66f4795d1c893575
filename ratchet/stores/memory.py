"""Memory across runs: what the `remember`/`recall`/`forget` tools keep (activities/memory_tools.py),
by `memory_scope`, in the ledger's SQLite database (tables of their own beside the ledger's).

Every write logs the value it replaced under the call's idempotency key, first attempt wins
(`INSERT OR IGNORE`), so a retried call never loses what its undo restores, and an undo puts back
exactly what the call found. A Postgres ledger (RATCHET_LEDGER_URL) has no memory tables yet: the
tools refuse to run there, saying so.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS ratchet_memory (scope TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,"
    " PRIMARY KEY (scope, key))",
    "CREATE TABLE IF NOT EXISTS ratchet_memory_writes (call_key TEXT PRIMARY KEY, scope TEXT NOT NULL,"
    " key TEXT NOT NULL, previous TEXT)",
)


class MemoryStore:
    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        with self._db() as db:
            for statement in SCHEMA:
                db.execute(statement)

    @contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        with closing(sqlite3.connect(self.path, timeout=30)) as db, db:
            yield db

    def write(self, call_key: str, scope: str, key: str, value: str | None) -> str | None:
        """Set (or, with None, delete) `key` of `scope`, in one transaction with the log of what it
        replaced; the value it replaced, as the call's first attempt found it."""
        with self._db() as db:
            db.execute("BEGIN IMMEDIATE")
            row = db.execute("SELECT value FROM ratchet_memory WHERE scope = ? AND key = ?", (scope, key)).fetchone()
            db.execute(
                "INSERT OR IGNORE INTO ratchet_memory_writes (call_key, scope, key, previous) VALUES (?, ?, ?, ?)",
                (call_key, scope, key, row[0] if row else None),
            )
            self._set(db, scope, key, value)
            logged = db.execute("SELECT previous FROM ratchet_memory_writes WHERE call_key = ?", (call_key,)).fetchone()
        return logged[0]

    def undo(self, call_key: str) -> str | None:
        """Put back what the call `call_key` replaced; the key it restored (None: it never wrote)."""
        with self._db() as db:
            db.execute("BEGIN IMMEDIATE")
            logged = db.execute(
                "SELECT scope, key, previous FROM ratchet_memory_writes WHERE call_key = ?", (call_key,)
            ).fetchone()
            if logged is None:
                return None
            scope, key, previous = logged
            self._set(db, scope, key, previous)
        return key

    def recall(self, scope: str, query: str, limit: int = 20) -> list[tuple[str, str]]:
        """The scope's memories whose key or value contains `query` (all of them for ""), by key."""
        pattern = "%" + query.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        with self._db() as db:
            rows = db.execute(
                "SELECT key, value FROM ratchet_memory WHERE scope = ? AND (key LIKE ? ESCAPE '\\' OR value LIKE ?"
                " ESCAPE '\\') ORDER BY key LIMIT ?",
                (scope, pattern, pattern, limit),
            ).fetchall()
        return [(key, value) for key, value in rows]

    @staticmethod
    def _set(db: sqlite3.Connection, scope: str, key: str, value: str | None) -> None:
        if value is None:
            db.execute("DELETE FROM ratchet_memory WHERE scope = ? AND key = ?", (scope, key))
        else:
            db.execute(
                "INSERT INTO ratchet_memory (scope, key, value) VALUES (?, ?, ?)"
                " ON CONFLICT (scope, key) DO UPDATE SET value = excluded.value",
                (scope, key, value),
            )
