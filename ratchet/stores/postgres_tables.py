"""The Postgres ledger's tables (ratchet/stores/postgres_ledger.py has the schema in its docstring):
their names, created once if absent; a row read as an `Entry`; and the statements of a batch import
(`ratchet migrate-stores`). Plain SQL on a connection the ledger gives; no connection handling here."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

from ratchet.stores.ledger import ChainRecord, Entry, EntryRecord, EntryStatus, LedgerRecord, entry_record, entry_row

LEDGER_TABLE = "ratchet_ledger"
CHAINS_TABLE = "ratchet_chains"
ENTRY_SELECT = (
    "SELECT key, status, undo, result, starts, extract(epoch FROM started_at)::float8,"
    f" extract(epoch FROM completed_at)::float8 FROM {LEDGER_TABLE}"
)
CHAIN_SELECT = f"SELECT workflow_id, chain, extract(epoch FROM claimed_at)::float8 FROM {CHAINS_TABLE}"
SCHEMA_LOCK = 0x7261746368657421  # pg_advisory_xact_lock key: "ratchet!"
SCHEMA = (
    f'CREATE TABLE IF NOT EXISTS {LEDGER_TABLE} (key text COLLATE "C" PRIMARY KEY,'
    " status text NOT NULL CHECK (status IN ('started', 'completed')), undo text, result text,"
    " starts integer NOT NULL DEFAULT 1, started_at timestamptz NOT NULL DEFAULT now(), completed_at timestamptz)",
    f'CREATE TABLE IF NOT EXISTS {CHAINS_TABLE} (workflow_id text COLLATE "C" PRIMARY KEY, chain text NOT NULL,'
    " claimed_at timestamptz NOT NULL DEFAULT now())",
)


def create_schema(conn: Any) -> None:
    """Both tables, if either is absent: created under a transaction-level advisory lock, so
    workers starting at once do not race on the catalog."""
    exists = conn.execute(
        "SELECT to_regclass(%s) IS NOT NULL AND to_regclass(%s) IS NOT NULL", (LEDGER_TABLE, CHAINS_TABLE)
    ).fetchone()[0]
    if exists:
        return
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
        for statement in SCHEMA:
            conn.execute(statement)


def read_entry(key: str, row: tuple[Any, ...]) -> Entry:
    """A row of (status, undo, result, starts) as the ledger entry of `key`."""
    status, undo, result, starts = row
    return Entry(
        key=key,
        status=EntryStatus(status),
        undo=json.loads(undo) if undo is not None else None,
        result=json.loads(result) if result is not None else None,
        starts=starts,
    )


def import_rows(
    conn: Any, records: Sequence[LedgerRecord], dry_run: bool
) -> dict[tuple[type, str], tuple[bool, LedgerRecord]]:
    """`records` inserted where their key is free, in one transaction (rolled back for a dry run):
    two statements per table for the whole batch (an INSERT of every record, ON CONFLICT DO NOTHING,
    then a SELECT of the rows); (record type, key) -> (inserted, the row as the table now holds it)."""
    entries = [entry_row(r) for r in records if isinstance(r, EntryRecord)]
    chains = [(r.workflow_id, r.chain, r.claimed_at) for r in records if isinstance(r, ChainRecord)]
    conn.execute("BEGIN")  # a failure before the end: the pool rolls back (or drops) the connection
    found: dict[tuple[type, str], tuple[bool, LedgerRecord]] = {
        (EntryRecord, key): (inserted, entry_record(row))
        for key, inserted, row in _upsert(
            conn,
            entries,
            LEDGER_TABLE,
            "key, status, undo, result, starts, started_at, completed_at",
            "text, text, text, text, int, float8, float8",
            "c0, c1, c2, c3, c4, to_timestamp(c5), to_timestamp(c6)",
            ENTRY_SELECT,
            "key",
        )
    }
    found.update(
        {
            (ChainRecord, key): (inserted, ChainRecord(*row))
            for key, inserted, row in _upsert(
                conn,
                chains,
                CHAINS_TABLE,
                "workflow_id, chain, claimed_at",
                "text, text, float8",
                "c0, c1, to_timestamp(c2)",
                CHAIN_SELECT,
                "workflow_id",
            )
        }
    )
    conn.execute("ROLLBACK" if dry_run else "COMMIT")
    return found


def _upsert(
    conn: Any, rows: list[tuple[Any, ...]], table: str, columns: str, types: str, values: str, select: str, key: str
) -> Iterator[tuple[str, bool, tuple[Any, ...]]]:
    """Insert `rows` (tuples of `columns`, sent as one array per column of `types`; `values` makes
    the table's values from them, named c0, c1, ...) where their key is free; (key, inserted, the
    row as `select` reads it) for every row."""
    if not rows:
        return
    types_ = [t.strip() for t in types.split(",")]
    names = [f"c{i}" for i in range(len(types_))]
    arrays = ", ".join(f"%s::{t}[]" for t in types_)
    inserted = {
        k
        for (k,) in conn.execute(
            f"INSERT INTO {table} ({columns}) SELECT {values} FROM unnest({arrays}) AS r({', '.join(names)})"
            f" ON CONFLICT ({key}) DO NOTHING RETURNING {key}",
            [list(column) for column in zip(*rows)],
        ).fetchall()
    }
    keys = [row[0] for row in rows]
    for row in conn.execute(f"{select} WHERE {key} = ANY(%s::text[])", (keys,)).fetchall():
        yield row[0], row[0] in inserted, row
