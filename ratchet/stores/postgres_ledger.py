"""The idempotency ledger in PostgreSQL, for workers on many hosts: `RATCHET_LEDGER_URL=postgresql://...`.

Same protocol and semantics as `SqliteLedger` (ratchet/stores/ledger.py), checked by the same
conformance suite (tests/stores/test_ledger_postgres.py). Needs the `postgres` extra (psycopg 3 and
psycopg_pool): `pip install 'ratchet-agents[postgres]'`.

Schema, created on open if absent (`CREATE TABLE IF NOT EXISTS` under a transaction-level advisory
lock, so workers starting at once do not race on the catalog; if both tables exist nothing is
created, so the role needs no CREATE privilege after the first start)::

    ratchet_ledger (key text COLLATE "C" PRIMARY KEY, status text NOT NULL ('started' | 'completed'),
                    undo text, result text, starts integer NOT NULL DEFAULT 1,
                    started_at timestamptz NOT NULL DEFAULT now(), completed_at timestamptz)
    ratchet_chains (workflow_id text COLLATE "C" PRIMARY KEY, chain text NOT NULL,
                    claimed_at timestamptz NOT NULL DEFAULT now())

The tables live in the connection's search path (usually `public`); another schema is
`?options=-csearch_path%3Dratchet` in the URL. Undo records and results are JSON as `text`, as
SQLite keeps them (not `jsonb`, which cannot hold `\\u0000`; Python's json module writes pure ASCII).
Keys use the "C" collation: compared byte by byte, and a claim selects `{workflow_id}/...` as the
range [`{workflow_id}/`, `{workflow_id}0`) (`0` follows `/`), never with a LIKE pattern.

Atomicity comes from rows, not from Python locks. `begin` is `INSERT ... ON CONFLICT DO NOTHING`
(the one caller whose insert lands has the first attempt); if the key exists, `UPDATE ... SET
starts = starts + 1 WHERE status = 'started' RETURNING` counts the start under the row lock, and a
completed entry (final) is read. `set_undo` is `UPDATE ... WHERE undo IS NULL`, `complete` is
`UPDATE ... WHERE status = 'started'`: first writer wins. Each of these writes at most once, in one
single-statement transaction. `claim` is one transaction: the chain's row is locked with `SELECT
... FOR UPDATE` (inserted first if absent), so concurrent claims of one workflow id run one after
the other and exactly one of them sees the old chain.

Synchronous, off the event loop. The `Ledger` protocol is synchronous; the activities call it in a
thread (`asyncio.to_thread`), as they do SQLite's, so a call waiting for the server holds up
neither the worker's event loop nor its other runs (only `ToolContext.record_undo`, which a tool
calls synchronously, runs on the loop). A ledger call is one round trip (two or three for `begin`
of a key that exists, five for `claim`, once per run) on a pooled connection (psycopg_pool, 1 to 4
connections, opened at start), so a step pays no connection setup; under a millisecond on a LAN.
Every wait is bounded all the same (a thread stuck on a dead server is a slot lost), and a call that cannot finish
raises `LedgerUnavailable` (retryable: the activity retries):

- connecting: `connect_timeout` 5 s; a connection from the pool: at most 10 s;
- a statement: `statement_timeout` 10 s on the server (lock waits included), and a client-side
  deadline of 15 s for the whole exchange (a server that hangs without closing the connection:
  a frozen process, stalled storage). The connection is then closed, not reused;
- a dead peer (host gone, network cut): TCP keepalives (5 s idle, 2 s interval, 3 probes) and
  `tcp_user_timeout` 10 s; a restarted server: the broken connection raises at once and is dropped;
- an idle transaction left open by a stuck client: `idle_in_transaction_session_timeout` 30 s.

`export` reads EXPORT_PAGE rows per call (keyset pages by key, no transaction left open between
them); `import_entries` is one transaction of two statements per table for a whole batch (an
INSERT of unnested arrays, ON CONFLICT DO NOTHING, then a SELECT of the rows to compare).

`connect_timeout`, the keepalives and `tcp_user_timeout` in the URL's query override these defaults.
A call whose COMMIT was sent but whose answer was lost is ambiguous, like any remote store: the
activity's retry then finds the key STARTED and takes the outcome-unknown path (see ledger.py).
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from ratchet.core.settings_errors import SettingsError, mask_url
from ratchet.stores.ledger import (
    ChainRecord,
    Entry,
    EntryRecord,
    ImportOutcome,
    LedgerRecord,
    entry_record,
    import_outcome,
)
from ratchet.stores.postgres_tables import (
    CHAIN_SELECT,
    CHAINS_TABLE,
    ENTRY_SELECT,
    LEDGER_TABLE,
    create_schema,
    import_rows,
    read_entry,
)

try:
    import psycopg
    import psycopg_pool
except ImportError:  # the `postgres` extra is not installed: PostgresLedger(url) says so
    psycopg = psycopg_pool = None  # type: ignore[assignment]  # None stands for the missing modules

__all__ = ["LedgerUnavailable", "PostgresLedger"]

SETTING = "RATCHET_LEDGER_URL"
CONNECT_TIMEOUT_S = 5
POOL_TIMEOUT_S = 10.0
POOL_MAX_SIZE = 4
STATEMENT_TIMEOUT_MS = 10_000
CLIENT_DEADLINE_S = 15.0
IDLE_IN_TRANSACTION_TIMEOUT_MS = 30_000
EXPORT_PAGE = 1000
"""Rows per round trip of `export` (keyset pages: no transaction stays open between them)."""
CONNECTION_DEFAULTS = {
    "connect_timeout": str(CONNECT_TIMEOUT_S),
    "keepalives": "1",
    "keepalives_idle": "5",
    "keepalives_interval": "2",
    "keepalives_count": "3",
    "tcp_user_timeout": "10000",
    "application_name": "ratchet-ledger",
}
"""libpq parameters set unless the URL sets them."""

T = TypeVar("T")


class LedgerUnavailable(Exception):
    """The database did not answer a ledger call (unreachable, restarting, too slow). Retryable:
    nothing is known to have been written, or the write is the activity retry's to find."""


def _one_line(exc: BaseException, url: str) -> str:
    """An error's text on one line, without the URL's password should libpq ever echo it."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    password = _password(url)
    return text.replace(password, "****") if password else text


def _password(url: str) -> str | None:
    try:
        password = psycopg.conninfo.conninfo_to_dict(url).get("password")
        return str(password) if password else None
    except Exception:
        return None


class PostgresLedger:
    """The `Ledger` on a PostgreSQL database (11 or later; tested on 18). `PostgresLedger(url)`
    connects, creates the tables if absent and opens the pool; a bad URL, an unreachable server or
    rejected credentials raise `SettingsError` naming RATCHET_LEDGER_URL (its password masked)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.shown = mask_url(url)
        if psycopg is None:
            raise SettingsError(
                f"{SETTING}={self.shown!r}: a postgresql:// URL needs psycopg and psycopg_pool: "
                "pip install 'ratchet-agents[postgres]'"
            )
        if not re.match(r"(?i)postgres(ql)?://", url):
            raise SettingsError(f"{SETTING}={self.shown!r}: not a postgresql:// URL")
        try:
            given = psycopg.conninfo.conninfo_to_dict(url)
        except psycopg.Error as exc:
            raise SettingsError(
                f"{SETTING}={self.shown!r}: not a valid PostgreSQL URL: {_one_line(exc, url)}"
            ) from None
        defaults = {k: v for k, v in CONNECTION_DEFAULTS.items() if k not in given}
        self.conninfo = psycopg.conninfo.make_conninfo(url, **defaults)
        try:
            with _DeadlineConnection.connect(self.conninfo, autocommit=True) as conn:
                _configure(conn)
                create_schema(conn)
        except psycopg.Error as exc:
            raise SettingsError(f"{SETTING}={self.shown!r}: cannot use the database: {_one_line(exc, url)}") from None
        self._pool = psycopg_pool.ConnectionPool(
            self.conninfo,
            connection_class=_DeadlineConnection,
            kwargs={"autocommit": True},
            min_size=1,
            max_size=POOL_MAX_SIZE,
            open=False,
            configure=_configure,
            timeout=POOL_TIMEOUT_S,
            name="ratchet-ledger",
        )
        try:
            self._pool.open(wait=True, timeout=CONNECT_TIMEOUT_S * 2)
        except Exception as exc:
            self._pool.close()
            raise SettingsError(
                f"{SETTING}={self.shown!r}: cannot open a connection pool: {_one_line(exc, url)}"
            ) from None

    @classmethod
    def from_url(cls, url: str) -> PostgresLedger:
        return cls(url)

    def __repr__(self) -> str:
        return f"PostgresLedger({self.shown})"

    def close(self) -> None:
        """Close the pool's connections (a handle is also closed when garbage-collected)."""
        self._pool.close()

    def __enter__(self) -> PostgresLedger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # the protocol

    def begin(self, key: str) -> Entry | None:
        def begin(conn: Any) -> Entry | None:
            while True:
                inserted = conn.execute(
                    f"INSERT INTO {LEDGER_TABLE} (key, status) VALUES (%s, 'started') ON CONFLICT (key) DO NOTHING"
                    " RETURNING 1",
                    (key,),
                ).fetchone()
                if inserted:
                    return None
                row = conn.execute(
                    f"UPDATE {LEDGER_TABLE} SET starts = starts + 1 WHERE key = %s AND status = 'started'"
                    " RETURNING status, undo, result, starts - 1",
                    (key,),
                ).fetchone()
                if row is None:  # completed (final), or moved aside by a claim in between: insert again
                    row = conn.execute(
                        f"SELECT status, undo, result, starts FROM {LEDGER_TABLE} WHERE key = %s", (key,)
                    ).fetchone()
                if row is not None:
                    return read_entry(key, row)

        return self.call("begin", key, begin)

    def set_undo(self, key: str, undo: dict[str, Any]) -> None:
        data = json.dumps(undo)
        self.call(
            "set_undo",
            key,
            lambda conn: conn.execute(
                f"UPDATE {LEDGER_TABLE} SET undo = %s WHERE key = %s AND undo IS NULL", (data, key)
            ),
        )

    def complete(self, key: str, result: dict[str, Any]) -> None:
        data = json.dumps(result)
        self.call(
            "complete",
            key,
            lambda conn: conn.execute(
                f"INSERT INTO {LEDGER_TABLE} AS t (key, status, result, completed_at)"
                " VALUES (%s, 'completed', %s, now()) ON CONFLICT (key) DO UPDATE SET status = 'completed',"
                " result = excluded.result, completed_at = excluded.completed_at WHERE t.status = 'started'",
                (key, data),
            ),
        )

    def release(self, key: str) -> None:
        self.call(
            "release",
            key,
            lambda conn: conn.execute(f"DELETE FROM {LEDGER_TABLE} WHERE key = %s AND status = 'started'", (key,)),
        )

    def get(self, key: str) -> Entry | None:
        def get(conn: Any) -> Entry | None:
            row = conn.execute(
                f"SELECT status, undo, result, starts FROM {LEDGER_TABLE} WHERE key = %s", (key,)
            ).fetchone()
            return None if row is None else read_entry(key, row)

        return self.call("get", key, get)

    def claim(self, workflow_id: str, chain: str) -> str | None:
        prefix, end = f"{workflow_id}/", f"{workflow_id}0"  # '0' is the character after '/'

        def claim(conn: Any) -> str | None:
            conn.execute("BEGIN")  # a failure before COMMIT: the pool rolls back (or drops) the connection
            while True:
                row = conn.execute(
                    f"SELECT chain FROM {CHAINS_TABLE} WHERE workflow_id = %s FOR UPDATE", (workflow_id,)
                ).fetchone()
                if row is not None:
                    previous = row[0]
                    if previous != chain:
                        conn.execute(
                            f"UPDATE {CHAINS_TABLE} SET chain = %s, claimed_at = now() WHERE workflow_id = %s",
                            (chain, workflow_id),
                        )
                    break
                inserted = conn.execute(
                    f"INSERT INTO {CHAINS_TABLE} (workflow_id, chain) VALUES (%s, %s)"
                    " ON CONFLICT (workflow_id) DO NOTHING RETURNING 1",
                    (workflow_id, chain),
                ).fetchone()
                if inserted:  # never claimed: this claim owns it now
                    previous = None
                    break
                # a concurrent claim inserted the row after the SELECT (and committed): lock it
            if previous != chain:
                # entries written before any claim belong to an earlier chain too
                conn.execute(
                    f"UPDATE {LEDGER_TABLE} SET key = '#' || %s || '#' || key"
                    " WHERE key >= %s AND key < %s AND starts_with(key, %s)",
                    (previous or "unclaimed", prefix, end, prefix),
                )
            conn.execute("COMMIT")
            return previous if previous != chain else None

        return self.call("claim", workflow_id, claim)

    def forget(self, workflow_id: str) -> int:
        prefix = f"{workflow_id}/"

        def forget(conn: Any) -> int:
            conn.execute("BEGIN")
            deleted = conn.execute(
                f"DELETE FROM {LEDGER_TABLE} WHERE starts_with(key, %(p)s) OR (starts_with(key, '#')"
                " AND starts_with(substr(key, strpos(substr(key, 2), '#') + 2), %(p)s))",
                {"p": prefix},
            ).rowcount
            conn.execute(f"DELETE FROM {CHAINS_TABLE} WHERE workflow_id = %s", (workflow_id,))
            conn.execute("COMMIT")
            return deleted

        return self.call("forget", workflow_id, forget)

    def export(self) -> Iterator[LedgerRecord]:
        yield from map(entry_record, self._pages(ENTRY_SELECT, "key"))
        yield from (ChainRecord(*row) for row in self._pages(CHAIN_SELECT, "workflow_id"))

    def _pages(self, select: str, column: str) -> Iterator[tuple[Any, ...]]:
        after: str | None = None
        while True:
            where, params = ("", ()) if after is None else (f" WHERE {column} > %s", (after,))
            rows = self.call(
                "export",
                after or "",
                lambda conn: conn.execute(f"{select}{where} ORDER BY {column} LIMIT {EXPORT_PAGE}", params).fetchall(),
            )
            yield from rows
            if len(rows) < EXPORT_PAGE:
                return
            after = rows[-1][0]

    def import_entries(self, records: Sequence[LedgerRecord], *, dry_run: bool = False) -> list[ImportOutcome]:
        """Two statements per table for the whole batch, in one transaction (`import_rows`)."""
        found = self.call("import", f"{len(records)} records", lambda conn: import_rows(conn, records, dry_run))
        outcomes = []
        for record in records:
            inserted, existing = found[
                type(record), record.key if isinstance(record, EntryRecord) else record.workflow_id
            ]
            outcomes.append(import_outcome(record, existing, inserted=inserted))
        return outcomes

    def call(self, op: str, key: str, fn: Callable[[Any], T]) -> T:
        """`fn` on a pooled connection (the ledger's calls, and the memory tables' in
        ratchet/stores/memory.py). An unanswered or broken connection is closed (the pool
        replaces it) and the call raises `LedgerUnavailable`; other database errors (a key psycopg
        cannot send, say) propagate, and the pool rolls back what `fn` left open."""
        try:
            with self._pool.connection() as conn:
                try:
                    return fn(conn)
                except psycopg.OperationalError:
                    conn.close()  # mid-exchange or broken: never back into the pool
                    raise
        except (psycopg.OperationalError, psycopg_pool.PoolTimeout) as exc:
            why = (
                f"no answer within {CLIENT_DEADLINE_S:g} s"
                if type(exc).__name__ == "_WaitTimeout"
                else _one_line(exc, self.url)
            )
            raise LedgerUnavailable(f"ledger {op} of {key!r}: the database at {self.shown} failed: {why}") from exc


def _configure(conn: Any) -> None:
    """Server-side bounds for every connection (see the module docstring), and READ COMMITTED
    whatever the database's default: the statements above rely on each seeing the rows committed
    before it (a stricter level would fail concurrent claims and begins with serialization errors)."""
    conn.execute(
        f"SET statement_timeout = {STATEMENT_TIMEOUT_MS}; "
        f"SET idle_in_transaction_session_timeout = {IDLE_IN_TRANSACTION_TIMEOUT_MS}; "
        "SET default_transaction_isolation = 'read committed'"
    )


if psycopg is not None:
    _DEADLINE = "timeout" in inspect.signature(psycopg.Connection.wait).parameters  # psycopg 3.3 and later

    class _DeadlineConnection(psycopg.Connection):
        """A connection whose every exchange with the server ends within CLIENT_DEADLINE_S: psycopg
        waits on the socket without a limit, and statement_timeout needs a server that still runs.
        Past the deadline psycopg raises an OperationalError; the ledger then closes the connection."""

        def wait(self, gen: Any, *args: Any, **kwargs: Any) -> Any:
            if _DEADLINE and len(args) < 2 and kwargs.get("timeout") is None:
                kwargs["timeout"] = CLIENT_DEADLINE_S
            return super().wait(gen, *args, **kwargs)
