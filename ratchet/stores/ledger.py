"""The idempotency ledger: a durable, write-ahead record of side effects by idempotency key.

A side-effecting call is recorded as STARTED (with whatever its undo needs) before it acts and as
COMPLETED (with its result) after. A retry then knows what happened:

- COMPLETED: return the recorded result; do not act again.
- STARTED only: outcome unknown (the worker died between acting and recording). The tool's
  `reconcile` hook asks the target system; without one, the call is repeated only if the tool is
  idempotent under its key; otherwise the run is asked for a decision.

The window the ledger cannot close: a crash after the side effect and before the COMPLETED write.
A tool closes it by doing its side effect and its own record in one transaction (see the tracker
tool) or by passing the key to a target system that deduplicates on it.

Keys are `{workflow id}/{step}/{call}`: stable across retries, crashes and continue-as-new. A
workflow id can be used again once its run has closed, by a new and unrelated run; `claim` (called
by run.prepare with the run chain's first run id) moves the earlier chain's entries aside under
`#{that chain}#{key}`, so the new run neither skips a side effect nor gets an old model reply.

`SqliteLedger` (WAL mode) is safe for several worker processes on one host. A shared database
(Postgres) implements the same `Ledger` protocol for many hosts; tests/test_ledger.py is the
conformance suite a new implementation must pass.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol


class EntryStatus(StrEnum):
    STARTED = "started"
    COMPLETED = "completed"


@dataclass(frozen=True)
class Entry:
    key: str
    status: EntryStatus
    undo: dict[str, Any] | None
    result: dict[str, Any] | None
    starts: int


class Ledger(Protocol):
    def begin(self, key: str) -> Entry | None:
        """Record `key` as started. Returns the existing entry (not changed) if there is one."""

    def set_undo(self, key: str, undo: dict[str, Any]) -> None:
        """Record what the undo of `key` needs, before the side effect. The first record wins: a
        retry of a call that already acted must not replace the state from before the call."""

    def complete(self, key: str, result: dict[str, Any]) -> None: ...

    def get(self, key: str) -> Entry | None: ...

    def claim(self, workflow_id: str, chain: str) -> str | None:
        """Make `chain` (a run chain's first run id) the owner of the keys `{workflow_id}/...`. If
        another chain owned them, its entries are archived as `#{old chain}#{key}` and the old chain
        is returned; claiming again for the same chain changes nothing."""


class SqliteLedger:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        with self._conn() as conn:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS ledger (key TEXT PRIMARY KEY, status TEXT NOT NULL,"
                " undo TEXT, result TEXT, starts INTEGER NOT NULL DEFAULT 1,"
                " started_at REAL NOT NULL, completed_at REAL)"
            )
            conn.execute(
                "CREATE TABLE IF NOT EXISTS chains (workflow_id TEXT PRIMARY KEY, chain TEXT NOT NULL, claimed_at REAL NOT NULL)"
            )

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
            self._local.conn = conn
        return conn

    def begin(self, key: str) -> Entry | None:
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            existing = self._read(conn, key)
            if existing is None:
                conn.execute(
                    "INSERT INTO ledger (key, status, started_at) VALUES (?, ?, ?)",
                    (key, EntryStatus.STARTED, time.time()),
                )
            elif existing.status == EntryStatus.STARTED:
                conn.execute("UPDATE ledger SET starts = starts + 1 WHERE key = ?", (key,))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return existing

    def set_undo(self, key: str, undo: dict[str, Any]) -> None:
        self._conn().execute(
            "UPDATE ledger SET undo = ? WHERE key = ? AND undo IS NULL", (json.dumps(undo), key)
        )

    def complete(self, key: str, result: dict[str, Any]) -> None:
        self._conn().execute(
            "UPDATE ledger SET status = ?, result = ?, completed_at = ? WHERE key = ?",
            (EntryStatus.COMPLETED, json.dumps(result), time.time(), key),
        )

    def get(self, key: str) -> Entry | None:
        return self._read(self._conn(), key)

    def claim(self, workflow_id: str, chain: str) -> str | None:
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            row = conn.execute("SELECT chain FROM chains WHERE workflow_id = ?", (workflow_id,)).fetchone()
            previous = row[0] if row else None
            if previous != chain:
                conn.execute(
                    "INSERT INTO chains (workflow_id, chain, claimed_at) VALUES (?, ?, ?) ON CONFLICT (workflow_id)"
                    " DO UPDATE SET chain = excluded.chain, claimed_at = excluded.claimed_at",
                    (workflow_id, chain, time.time()),
                )
                # entries written before claims existed belong to an earlier chain too; an exact,
                # case-sensitive prefix (SQLite's LIKE ignores case: `Fix-Bug` is not `fix-bug`)
                prefix = f"{workflow_id}/"
                conn.execute(
                    "UPDATE ledger SET key = '#' || ? || '#' || key WHERE substr(key, 1, ?) = ?",
                    (previous or "unclaimed", len(prefix), prefix),
                )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return previous if previous != chain else None

    def keys(self, prefix: str = "") -> list[Entry]:
        rows = self._conn().execute(
            "SELECT key FROM ledger WHERE substr(key, 1, ?) = ? ORDER BY started_at", (len(prefix), prefix)
        ).fetchall()
        return [e for (key,) in rows if (e := self.get(key)) is not None]

    @staticmethod
    def _read(conn: sqlite3.Connection, key: str) -> Entry | None:
        row = conn.execute("SELECT status, undo, result, starts FROM ledger WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        status, undo, result, starts = row
        return Entry(
            key=key,
            status=EntryStatus(status),
            undo=json.loads(undo) if undo else None,
            result=json.loads(result) if result else None,
            starts=starts,
        )

