"""A ticket tracker: a side effect outside the workspace, with a real undo.

It closes the ledger's window the way a well-behaved target system does: the ticket row carries
the call's idempotency key under a UNIQUE constraint, written in the same statement as the
ticket (`INSERT ... ON CONFLICT DO NOTHING`), so a repeated call can never create a second ticket,
and `reconcile` can ask the tracker whether an interrupted call took effect.

Where the tickets are, the tracker's own settings (`TrackerSettings`, read from the environment
as a tool's own configuration is, not part of the worker's): a SQLite file (RATCHET_TRACKER_PATH,
the default: one host), or PostgreSQL when RATCHET_TRACKER_URL is a postgresql:// URL (workers on
several hosts share it; the `postgres` extra). The statements are the same on both; only the id
column's type differs. A database that cannot be reached raises, and the activity retries
(Temporal's policy, not a loop here).
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

from pydantic import AliasChoices, BaseModel, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from ratchet.core.settings_errors import SettingsError, mask_url
from ratchet.core.tools import ToolContext, ToolOutput, reconcile_for, tool, undo_for, undo_record

TRACKER_SETTING = "RATCHET_TRACKER_URL"
CONNECT_TIMEOUT_S = 5
ID_COLUMN = {"sqlite": "id INTEGER PRIMARY KEY AUTOINCREMENT", "postgresql": "id BIGSERIAL PRIMARY KEY"}
TICKETS = (
    "CREATE TABLE IF NOT EXISTS tickets ({id},"
    " idempotency_key TEXT UNIQUE NOT NULL, title TEXT NOT NULL, body TEXT NOT NULL)"
)
"""A table's DDL; `{id}` becomes the backend's auto-increment id column."""
_SCHEMA_LOCK = 0x747261636B657221  # pg_advisory_xact_lock key: "tracker!"
_created: set[tuple[str, str]] = set()
"""(URL, DDL) already created by this process: one catalog round trip per table, not per call."""


class CreateTicketArgs(BaseModel):
    title: str = Field(min_length=1, max_length=200)
    body: str = Field("", max_length=20_000)


class TrackerSettings(BaseSettings):
    """The example tracker's database, read from the environment (and RATCHET_ENV_FILE) when a
    tracker tool runs: its own settings, not the worker's."""

    model_config = SettingsConfigDict(
        env_file=os.environ.get("RATCHET_ENV_FILE"), extra="ignore", populate_by_name=True, env_ignore_empty=True
    )

    path: Path = Field(Path(".ratchet/tracker.sqlite3"), validation_alias=AliasChoices("RATCHET_TRACKER_PATH"))
    url: SecretStr | None = Field(
        None,
        validation_alias=AliasChoices(TRACKER_SETTING),
        description="postgresql://USER:PASSWORD@HOST:PORT/DB (shared by many hosts). Unset: the SQLite file "
        "RATCHET_TRACKER_PATH. A secret: redacted as RATCHET_LEDGER_URL is.",
    )

    def database_url(self) -> str | None:
        """RATCHET_TRACKER_URL (a postgresql:// URL), or None: the SQLite file."""
        if self.url is None:
            return None
        url = self.url.get_secret_value()
        if not url.lower().startswith(("postgresql://", "postgres://")):
            raise SettingsError(
                f"{TRACKER_SETTING}={mask_url(url)!r}: expected postgresql://USER:PASSWORD@HOST:PORT/DB"
            )
        return url

    def environment(self) -> dict[str, str]:
        """These settings as the variables a worker process reads them from."""
        env = {"RATCHET_TRACKER_PATH": str(self.path)}
        if self.url is not None:
            env[TRACKER_SETTING] = self.url.get_secret_value()
        return env


def connect(path: Path) -> sqlite3.Connection:
    """The SQLite tracker at `path`, its tickets table created if absent."""
    return sqlite_tracker(path, TICKETS)


def sqlite_tracker(path: Path, *tables: str) -> sqlite3.Connection:
    """A connection to the SQLite file at `path`, `tables` (DDL, see TICKETS) created if absent."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, timeout=30, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    for ddl in tables:
        conn.execute(ddl.format(id=ID_COLUMN["sqlite"]))
    return conn


class _Postgres:
    """A psycopg connection that takes the SQLite statements (`?` placeholders)."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    def execute(self, sql: str, params: tuple = ()) -> Any:
        return self.conn.execute(sql.replace("?", "%s"), params)


@contextmanager
def open_tracker(tracker: TrackerSettings | None, *tables: str) -> Iterator[Any]:
    """A connection to the tracker (`tracker`, None: the environment's; autocommit: each statement
    is its own transaction), `tables` (DDL, see TICKETS) created if absent; closed on exit."""
    tracker = tracker if tracker is not None else TrackerSettings()
    url = tracker.database_url()
    if url is None:
        with closing(sqlite_tracker(tracker.path, *tables)) as conn:
            yield conn
        return
    import psycopg  # the `postgres` extra, only when a URL asks for it

    with psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S) as conn:
        for ddl in tables:
            if (url, ddl) not in _created:
                with conn.transaction():  # concurrent CREATE TABLE IF NOT EXISTS can collide in the catalog
                    conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
                    conn.execute(ddl.format(id=ID_COLUMN["postgresql"]))
                _created.add((url, ddl))
        yield _Postgres(conn)


def _output(ticket_id: int, title: str) -> ToolOutput:
    undo = undo_record(f"delete ticket #{ticket_id} ({title[:60]})", ticket_id=ticket_id)
    return ToolOutput(output=f"created ticket #{ticket_id}: {title}", undo=undo)


@tool(effect="compensable", timeout_s=30, idempotent=True)
def create_ticket(ctx: ToolContext, args: CreateTicketArgs) -> ToolOutput:
    """Create a ticket in the team's tracker."""
    with open_tracker(None, TICKETS) as conn:
        conn.execute(
            "INSERT INTO tickets (idempotency_key, title, body) VALUES (?, ?, ?)"
            " ON CONFLICT (idempotency_key) DO NOTHING",
            (ctx.key, args.title, args.body),
        )
        (ticket_id,) = conn.execute("SELECT id FROM tickets WHERE idempotency_key = ?", (ctx.key,)).fetchone()
    return _output(ticket_id, args.title)


@reconcile_for("create_ticket")
def reconcile_create_ticket(ctx: ToolContext, args: CreateTicketArgs) -> ToolOutput | None:
    with open_tracker(None, TICKETS) as conn:
        row = conn.execute("SELECT id FROM tickets WHERE idempotency_key = ?", (ctx.key,)).fetchone()
    return _output(row[0], args.title) if row else None


@undo_for("create_ticket")
def undo_create_ticket(ctx: ToolContext, args: CreateTicketArgs, undo: dict | None) -> str:
    """Delete the ticket the call created (found by its idempotency key, so this is safe even
    when the forward call's result was never recorded, or when it did nothing)."""
    forward_key = ctx.key.removesuffix("/undo")
    with open_tracker(None, TICKETS) as conn:
        deleted = conn.execute("DELETE FROM tickets WHERE idempotency_key = ?", (forward_key,)).rowcount
    return "deleted the ticket" if deleted else "no ticket to delete"
