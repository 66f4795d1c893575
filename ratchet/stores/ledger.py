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
(Postgres) implements the same `Ledger` protocol for many hosts and must pass the conformance
suite in ratchet/testing/stores.py (`LedgerConformance`), as SqliteLedger does in
tests/test_ledger.py.
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
    """What undoing the call needs, as first recorded by `set_undo`; None if nothing was recorded."""
    result: dict[str, Any] | None
    """The result recorded by `complete`; None while STARTED."""
    starts: int
    """How many `begin` calls found the key unknown or STARTED: 1 after the first, 2 after one
    retry met the STARTED entry (a worker died, or the attempt failed, after the call began)."""


class Ledger(Protocol):
    """What the runtime needs from an idempotency ledger (ratchet/testing/stores.py checks it).

    Keys are opaque, case-sensitive strings: no character (`%`, `_`, `*`, `#`) is a pattern. Every
    method is atomic and safe to call from several processes (and hosts) on one store at once;
    entries are durable once a method returns. Results and undo records are JSON objects and come
    back equal (an empty object stays an empty object, not None)."""

    def begin(self, key: str) -> Entry | None:
        """Start a call: None if `key` was unknown and this call recorded it as STARTED (the
        caller has the first attempt; of concurrent callers exactly one gets None). Otherwise the
        entry as it was before this call: a STARTED entry has its `starts` counted up, a COMPLETED
        one is not changed."""

    def set_undo(self, key: str, undo: dict[str, Any]) -> None:
        """Record what the undo of a begun `key` needs, before the side effect. The first record
        wins, later ones (and concurrent losers) change nothing: a retry of a call that already
        acted must not replace the state from before the call. The record outlives `complete`."""

    def complete(self, key: str, result: dict[str, Any]) -> None:
        """Record the result of a begun `key` and mark it COMPLETED. A completed entry is final:
        a later (or concurrent, losing) `complete` changes nothing, so every reader sees the same
        result."""

    def get(self, key: str) -> Entry | None:
        """The entry for `key`, or None if there is none. Reads only."""

    def claim(self, workflow_id: str, chain: str) -> str | None:
        """Make `chain` (a run chain's first run id) the owner of the keys `{workflow_id}/...`
        (an exact, case-sensitive prefix). If another chain owned them, their entries move to
        `#{old chain}#{key}` (still readable with `get`; the keys are free again) and the old chain
        is returned; entries from before any claim move to `#unclaimed#{key}` and None is returned.
        Claiming again for the owning chain changes nothing and returns None. Of concurrent claims
        by one new chain, exactly one returns the old chain."""


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
            "UPDATE ledger SET status = ?, result = ?, completed_at = ? WHERE key = ? AND status = ?",
            (EntryStatus.COMPLETED, json.dumps(result), time.time(), key, EntryStatus.STARTED),
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

