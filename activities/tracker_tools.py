"""A ticket tracker in SQLite: a side effect outside the workspace, with a real undo.

It closes the ledger's window the way a well-behaved target system does: the ticket row carries
the call's idempotency key under a UNIQUE constraint, written in the same transaction as the
ticket, so a repeated call can never create a second ticket, and `reconcile` can ask the tracker
whether an interrupted call took effect.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from pydantic import BaseModel, Field

from ratchet.core.tools import ToolContext, ToolOutput, reconcile_for, tool, undo_for

DEFAULT_TRACKER = Path(".ratchet/tracker.sqlite3")


class CreateTicketArgs(BaseModel):
    title: str = Field(min_length=1, max_length=200)
    body: str = Field("", max_length=20_000)


def tracker_path(ctx: ToolContext) -> Path:
    return Path(ctx.settings.tracker_path if ctx.settings is not None else DEFAULT_TRACKER)


def connect(path: Path) -> sqlite3.Connection:
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, timeout=30, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(
        "CREATE TABLE IF NOT EXISTS tickets (id INTEGER PRIMARY KEY AUTOINCREMENT,"
        " idempotency_key TEXT UNIQUE NOT NULL, title TEXT NOT NULL, body TEXT NOT NULL)"
    )
    return conn


def _output(ticket_id: int, title: str) -> ToolOutput:
    return ToolOutput(output=f"created ticket #{ticket_id}: {title}", undo={"ticket_id": ticket_id})


@tool(effect="compensable", timeout_s=30, idempotent=True)
def create_ticket(ctx: ToolContext, args: CreateTicketArgs) -> ToolOutput:
    """Create a ticket in the team's tracker."""
    with connect(tracker_path(ctx)) as conn:
        conn.execute(
            "INSERT OR IGNORE INTO tickets (idempotency_key, title, body) VALUES (?, ?, ?)",
            (ctx.key, args.title, args.body),
        )
        (ticket_id,) = conn.execute("SELECT id FROM tickets WHERE idempotency_key = ?", (ctx.key,)).fetchone()
    return _output(ticket_id, args.title)


@reconcile_for("create_ticket")
def reconcile_create_ticket(ctx: ToolContext, args: CreateTicketArgs) -> ToolOutput | None:
    with connect(tracker_path(ctx)) as conn:
        row = conn.execute("SELECT id FROM tickets WHERE idempotency_key = ?", (ctx.key,)).fetchone()
    return _output(row[0], args.title) if row else None


@undo_for("create_ticket")
def undo_create_ticket(ctx: ToolContext, args: CreateTicketArgs, undo: dict | None) -> str:
    """Delete the ticket the call created (found by its idempotency key, so this is safe even
    when the forward call's result was never recorded, or when it did nothing)."""
    forward_key = ctx.key.removesuffix("/undo")
    with connect(tracker_path(ctx)) as conn:
        deleted = conn.execute("DELETE FROM tickets WHERE idempotency_key = ?", (forward_key,)).rowcount
    return "deleted the ticket" if deleted else "no ticket to delete"
