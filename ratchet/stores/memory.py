"""Memory across runs: what the `remember`/`recall`/`forget` tools keep (activities/memory_tools.py),
by `memory_scope`, in the ledger's database, in tables of their own beside the ledger's: the SQLite
file (RATCHET_LEDGER_PATH) or, across hosts, the Postgres database (RATCHET_LEDGER_URL).

Every write logs the value it replaced under the call's idempotency key, first attempt wins
(`ON CONFLICT DO NOTHING`), so a retried call never loses what its undo restores, and an undo puts
back exactly what the call found. A write is one transaction that holds the key against other
writers while it reads, logs and sets (SQLite: `BEGIN IMMEDIATE`; Postgres: a transaction-level
advisory lock on the scope and key, and the ledger's pool, deadlines and `LedgerUnavailable`).

The statements are written once (`?` placeholders; Postgres gets `%s`); the two `Database`s differ
only in how a transaction is opened.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from ratchet.stores.sqlite_file import Query, SqliteDatabase


SCHEMA = (
    "CREATE TABLE IF NOT EXISTS ratchet_memory (scope TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,"
    " PRIMARY KEY (scope, key))",
    "CREATE TABLE IF NOT EXISTS ratchet_memory_writes (call_key TEXT PRIMARY KEY, scope TEXT NOT NULL,"
    " key TEXT NOT NULL, previous TEXT)",
)


class Database(Protocol):
    def transaction(self, what: str, lock: str | None, fn: Callable[[Query], Any]) -> Any:
        """`fn` in one transaction; `lock`: held against other writers of the same name first."""
        ...

    def read(self, what: str, fn: Callable[[Query], Any]) -> Any:
        """`fn`, which only reads, in one transaction that waits for no writer."""
        ...


class PostgresDatabase:
    """The Postgres ledger's database, through its pool (ratchet/stores/postgres_ledger.py)."""

    def __init__(self, url: str) -> None:
        from ratchet.stores.postgres_ledger import PostgresLedger

        self.ledger = PostgresLedger(url)

    def transaction(self, what: str, lock: str | None, fn: Callable[[Query], Any]) -> Any:
        def run(conn: Any) -> Any:
            def query(sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
                cursor = conn.execute(sql.replace("?", "%s"), params)
                return cursor.fetchall() if cursor.description else []

            with conn.transaction():
                if lock is not None:
                    conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (lock,))
                return fn(query)

        return self.ledger.call(f"memory {what}", lock or what, run)

    def read(self, what: str, fn: Callable[[Query], Any]) -> Any:
        return self.transaction(what, None, fn)  # no advisory lock: Postgres readers wait for no writer


class MemoryStore:
    def __init__(self, db: Database) -> None:
        self.db = db

        def create(query: Query) -> None:
            for statement in SCHEMA:
                query(statement, ())

        db.transaction("schema", "ratchet_memory schema", create)

    @classmethod
    def sqlite(cls, path: Path) -> MemoryStore:
        return cls(SqliteDatabase(path))

    @staticmethod
    @functools.cache
    def postgres(url: str) -> MemoryStore:
        """One store (one small pool) per database URL and process."""
        return MemoryStore(PostgresDatabase(url))

    def write(self, call_key: str, scope: str, key: str, value: str | None) -> str | None:
        """Set (or, with None, delete) `key` of `scope`, in one transaction with the log of what it
        replaced; the value it replaced, as the call's first attempt found it."""

        def write(query: Query) -> str | None:
            rows = query("SELECT value FROM ratchet_memory WHERE scope = ? AND key = ?", (scope, key))
            query(
                "INSERT INTO ratchet_memory_writes (call_key, scope, key, previous) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (call_key) DO NOTHING",
                (call_key, scope, key, rows[0][0] if rows else None),
            )
            _set(query, scope, key, value)
            return query("SELECT previous FROM ratchet_memory_writes WHERE call_key = ?", (call_key,))[0][0]

        return self.db.transaction("write", json.dumps([scope, key]), write)

    def undo(self, call_key: str) -> str | None:
        """Put back what the call `call_key` replaced; the key it restored (None: it never wrote)."""

        def undo(query: Query) -> str | None:
            logged = query("SELECT scope, key, previous FROM ratchet_memory_writes WHERE call_key = ?", (call_key,))
            if not logged:
                return None
            scope, key, previous = logged[0]
            _set(query, scope, key, previous)
            return key

        return self.db.transaction("undo", call_key, undo)

    def recall(self, scope: str, query: str, limit: int = 20) -> list[tuple[str, str]]:
        """The scope's memories whose key or value contains `query` (all of them for ""), by key."""
        pattern = "%" + query.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        rows = self.db.read(
            "recall",
            lambda q: q(
                "SELECT key, value FROM ratchet_memory WHERE scope = ? AND (key LIKE ? ESCAPE '\\' OR value LIKE ?"
                " ESCAPE '\\') ORDER BY key LIMIT ?",
                (scope, pattern, pattern, limit),
            ),
        )
        return [(key, value) for key, value in rows]


def _set(query: Query, scope: str, key: str, value: str | None) -> None:
    if value is None:
        query("DELETE FROM ratchet_memory WHERE scope = ? AND key = ?", (scope, key))
    else:
        query(
            "INSERT INTO ratchet_memory (scope, key, value) VALUES (?, ?, ?)"
            " ON CONFLICT (scope, key) DO UPDATE SET value = excluded.value",
            (scope, key, value),
        )
