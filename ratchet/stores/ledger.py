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
tests/stores/test_ledger.py.

Moving a ledger to another backend (`ratchet migrate-stores`, ratchet/stores/migrate.py) goes
through the protocol too: `export` reads every row as a record (`EntryRecord`, `ChainRecord`),
`import_entries` writes the records the destination does not have and keeps those it has.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol, TypeAlias

from ratchet.stores import sqlite_file


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


@dataclass(frozen=True)
class EntryRecord:
    """An entry with everything its row holds, for moving it to another ledger (`export`)."""

    key: str
    status: EntryStatus
    undo: dict[str, Any] | None
    result: dict[str, Any] | None
    starts: int
    started_at: float
    """When the first `begin` recorded it, in seconds since the epoch."""
    completed_at: float | None
    """When `complete` recorded the result; None while STARTED."""

    def same_as(self, other: EntryRecord) -> bool:
        """Whether `other` records the same call: status, undo, result (as JSON: `true` is not `1`)
        and starts equal. Times are carried over but not compared: backends keep them at
        different precisions."""
        return (self.key, self.status, _canonical(self.undo), _canonical(self.result), self.starts) == (
            other.key,
            other.status,
            _canonical(other.undo),
            _canonical(other.result),
            other.starts,
        )


@dataclass(frozen=True)
class ChainRecord:
    """Which run chain owns the keys `{workflow_id}/...` (see `Ledger.claim`)."""

    workflow_id: str
    chain: str
    claimed_at: float

    def same_as(self, other: ChainRecord) -> bool:
        return (self.workflow_id, self.chain) == (other.workflow_id, other.chain)


LedgerRecord: TypeAlias = EntryRecord | ChainRecord


class ImportOutcome(StrEnum):
    COPIED = "copied"
    """The destination had no row under the record's key: it has the record now."""
    PRESENT = "present"
    """The destination already had the same record (`same_as`): nothing written."""
    CONFLICT = "conflict"
    """The destination has a different row under the key: kept, nothing written."""


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
        """Record the result of `key` and mark it COMPLETED: a STARTED entry, or a new one when the
        call was not begun (a call that only reads its entry before acting; activities/exactly_once.py,
        `Call.claims`). A completed entry is final: a later (or concurrent, losing) `complete`
        changes nothing, so every reader sees the same result."""

    def release(self, key: str) -> None:
        """Forget a begun `key` whose call did not act (the tool raised `NotStarted`): a STARTED
        entry is deleted, its undo record with it, so the next `begin` claims the key afresh. A
        COMPLETED entry is final and not changed."""

    def get(self, key: str) -> Entry | None:
        """The entry for `key`, or None if there is none. Reads only."""

    def claim(self, workflow_id: str, chain: str) -> str | None:
        """Make `chain` (a run chain's first run id) the owner of the keys `{workflow_id}/...`
        (an exact, case-sensitive prefix). If another chain owned them, their entries move to
        `#{old chain}#{key}` (still readable with `get`; the keys are free again) and the old chain
        is returned; entries from before any claim move to `#unclaimed#{key}` and None is returned.
        Claiming again for the owning chain changes nothing and returns None. Of concurrent claims
        by one new chain, exactly one returns the old chain."""

    def forget(self, workflow_id: str) -> int:
        """Delete every entry of the run `workflow_id`: the keys `{workflow_id}/...` (an exact,
        case-sensitive prefix) and those a claim moved aside (`#{chain}#{workflow_id}/...`), and its
        chain; the number of entries deleted. For a run gone for good (`ratchet shadow clean`): no
        other workflow id's entries are touched, and forgetting again deletes nothing."""

    def export(self) -> Iterator[LedgerRecord]:
        """Every entry and every chain, each once, with all their fields. Reads only; read in
        pages, so a large ledger is never held in memory. Rows written while it runs may or may
        not be included: export a ledger no worker is using."""

    def import_entries(self, records: Sequence[LedgerRecord], *, dry_run: bool = False) -> list[ImportOutcome]:
        """Write each record whose key (workflow id for a chain) has no row yet, as it is, times
        included; keep every row that exists. One outcome per record, in order: COPIED, PRESENT
        (the same record, `same_as`) or CONFLICT (a different one, left as it is). Atomic: all
        of it is written or none. Importing the same records again only finds them PRESENT.
        `dry_run`: the same outcomes, nothing written."""


class SqliteLedger:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._writing = sqlite_file.writer(self.path)
        """One writer at a time in this process, billing and memory included (ratchet/stores/sqlite_file.py)."""
        with self._conn() as conn:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS ledger (key TEXT PRIMARY KEY, status TEXT NOT NULL,"
                " undo TEXT, result TEXT, starts INTEGER NOT NULL DEFAULT 1,"
                " started_at REAL NOT NULL, completed_at REAL)"
            )
            conn.execute(
                "CREATE TABLE IF NOT EXISTS chains"
                " (workflow_id TEXT PRIMARY KEY, chain TEXT NOT NULL, claimed_at REAL NOT NULL)"
            )

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = sqlite_file.connect(self.path)
        return conn

    @contextlib.contextmanager
    def _writer(self) -> Iterator[sqlite3.Connection]:
        with self._writing:
            yield self._conn()

    def begin(self, key: str) -> Entry | None:
        with self._writer() as conn:
            return self._begin(conn, key)

    def _begin(self, conn: sqlite3.Connection, key: str) -> Entry | None:
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
        with self._writer() as conn:
            conn.execute("UPDATE ledger SET undo = ? WHERE key = ? AND undo IS NULL", (json.dumps(undo), key))

    def complete(self, key: str, result: dict[str, Any]) -> None:
        record, now = json.dumps(result), time.time()
        with self._writer() as conn:
            conn.execute(
                "INSERT INTO ledger (key, status, result, started_at, completed_at) VALUES (?, ?, ?, ?, ?)"
                " ON CONFLICT (key) DO UPDATE SET status = excluded.status, result = excluded.result,"
                " completed_at = excluded.completed_at WHERE status = ?",
                (key, EntryStatus.COMPLETED, record, now, now, EntryStatus.STARTED),
            )

    def release(self, key: str) -> None:
        with self._writer() as conn:
            conn.execute("DELETE FROM ledger WHERE key = ? AND status = ?", (key, EntryStatus.STARTED))

    def get(self, key: str) -> Entry | None:
        return self._read(self._conn(), key)

    def claim(self, workflow_id: str, chain: str) -> str | None:
        with self._writer() as conn:
            return self._claim(conn, workflow_id, chain)

    def _claim(self, conn: sqlite3.Connection, workflow_id: str, chain: str) -> str | None:
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

    def forget(self, workflow_id: str) -> int:
        prefix = f"{workflow_id}/"
        with self._writer() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:  # substr, not LIKE: exact and case-sensitive; aside: the key after `#{chain}#`
                deleted = conn.execute(
                    "DELETE FROM ledger WHERE substr(key, 1, ?1) = ?2"
                    " OR (substr(key, 1, 1) = '#' AND substr(key, instr(substr(key, 2), '#') + 2, ?1) = ?2)",
                    (len(prefix), prefix),
                ).rowcount
                conn.execute("DELETE FROM chains WHERE workflow_id = ?", (workflow_id,))
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        return deleted

    def export(self) -> Iterator[LedgerRecord]:
        conn = sqlite3.connect(self.path, timeout=30, isolation_level=None)  # its own: rows stream lazily
        try:
            conn.execute("BEGIN")  # one snapshot for both tables (WAL: writers are not blocked)
            yield from map(entry_record, conn.execute(f"SELECT {ENTRY_COLUMNS} FROM ledger ORDER BY key"))
            for workflow_id, chain, claimed_at in conn.execute(
                "SELECT workflow_id, chain, claimed_at FROM chains ORDER BY workflow_id"
            ):
                yield ChainRecord(workflow_id, chain, claimed_at)
            conn.execute("COMMIT")
        finally:
            conn.close()

    def import_entries(self, records: Sequence[LedgerRecord], *, dry_run: bool = False) -> list[ImportOutcome]:
        with self._writer() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                outcomes = [self._import(conn, record) for record in records]
                conn.execute("ROLLBACK" if dry_run else "COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        return outcomes

    @staticmethod
    def _import(conn: sqlite3.Connection, record: LedgerRecord) -> ImportOutcome:
        if isinstance(record, EntryRecord):
            inserted = conn.execute(
                f"INSERT INTO ledger ({ENTRY_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (key) DO NOTHING",
                entry_row(record),
            ).rowcount
            row = conn.execute(f"SELECT {ENTRY_COLUMNS} FROM ledger WHERE key = ?", (record.key,)).fetchone()
            existing: LedgerRecord = entry_record(row)
        else:
            inserted = conn.execute(
                "INSERT INTO chains (workflow_id, chain, claimed_at) VALUES (?, ?, ?)"
                " ON CONFLICT (workflow_id) DO NOTHING",
                (record.workflow_id, record.chain, record.claimed_at),
            ).rowcount
            row = conn.execute(
                "SELECT workflow_id, chain, claimed_at FROM chains WHERE workflow_id = ?", (record.workflow_id,)
            ).fetchone()
            existing = ChainRecord(*row)
        return import_outcome(record, existing, inserted=bool(inserted))

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


# moving rows between ledgers: one row shape for every backend

ENTRY_COLUMNS = "key, status, undo, result, starts, started_at, completed_at"
"""An `EntryRecord`'s row, in its field order (times as seconds since the epoch)."""


def entry_record(row: Sequence[Any]) -> EntryRecord:
    key, status, undo, result, starts, started_at, completed_at = row
    return EntryRecord(
        key=key,
        status=EntryStatus(status),
        undo=_loads(undo),
        result=_loads(result),
        starts=starts,
        started_at=float(started_at),
        completed_at=None if completed_at is None else float(completed_at),
    )


def entry_row(record: EntryRecord) -> tuple[Any, ...]:
    """`record` as the row values of ENTRY_COLUMNS, JSON as the ledger writes it."""
    return (
        record.key,
        str(record.status),
        _dumps(record.undo),
        _dumps(record.result),
        record.starts,
        record.started_at,
        record.completed_at,
    )


def import_outcome(record: LedgerRecord, existing: LedgerRecord, *, inserted: bool) -> ImportOutcome:
    if inserted:
        return ImportOutcome.COPIED
    same = record.same_as(existing)  # type: ignore[arg-type]  # `existing`: the stored record of its kind and name
    return ImportOutcome.PRESENT if same else ImportOutcome.CONFLICT


def _loads(text: str | None) -> dict[str, Any] | None:
    return None if text is None else json.loads(text)


def _canonical(value: dict[str, Any] | None) -> str:
    return json.dumps(value, sort_keys=True)


def _dumps(value: dict[str, Any] | None) -> str | None:
    return None if value is None else json.dumps(value)
