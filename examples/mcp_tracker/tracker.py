"""An issue tracker as an MCP server (the official SDK's `MCPServer`): the README's MCP example and the tests' server.

stdio by default; `--http PORT` serves streamable HTTP on 127.0.0.1. Issues live in the SQLite file
TRACKER_DB, and every call that acts adds a row to its `effects` table, so a test counts side
effects exactly. `create_issue` deduplicates on the request's `_meta` idempotency key, as a server
that honours it should.
"""

from __future__ import annotations

import os
import sqlite3
import sys
import time

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations
from pydantic import BaseModel

KEY = "ratchet/idempotency-key"
server = MCPServer("tracker")


class Issue(BaseModel):
    id: int
    title: str
    open: bool


def db() -> sqlite3.Connection:
    conn = sqlite3.connect(os.environ["TRACKER_DB"], isolation_level=None, timeout=10)
    conn.execute("CREATE TABLE IF NOT EXISTS issues (id INTEGER PRIMARY KEY, title TEXT, open INTEGER, key TEXT UNIQUE)")
    conn.execute("CREATE TABLE IF NOT EXISTS effects (tool TEXT, detail TEXT, key TEXT)")
    return conn


def key_of(ctx: Context) -> str | None:
    return (ctx.request_context.meta or {}).get(KEY)


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def search_issues(query: str = "") -> list[Issue]:
    """The issues whose title contains `query`."""
    rows = db().execute("SELECT id, title, open FROM issues WHERE title LIKE ? ORDER BY id", (f"%{query}%",))
    return [Issue(id=i, title=t, open=bool(o)) for i, t, o in rows]


@server.tool()
def create_issue(title: str, ctx: Context, delay_s: float = 0.0) -> Issue:
    """Open an issue (and answer `delay_s` seconds after it is open)."""
    conn = db()
    key = key_of(ctx)
    row = conn.execute("SELECT id, title, open FROM issues WHERE key = ?", (key,)).fetchone() if key else None
    if row is None:
        row = (conn.execute("INSERT INTO issues (title, open, key) VALUES (?, 1, ?)", (title, key)).lastrowid, title, 1)
        conn.execute("INSERT INTO effects VALUES ('create_issue', ?, ?)", (title, key))
        time.sleep(delay_s)
    return Issue(id=row[0], title=row[1], open=bool(row[2]))


@server.tool(annotations=ToolAnnotations(destructive_hint=False, idempotent_hint=True))
def close_issue(id: int, ctx: Context) -> str:
    """Close an issue."""
    conn = db()
    conn.execute("UPDATE issues SET open = 0 WHERE id = ?", (id,))
    conn.execute("INSERT INTO effects VALUES ('close_issue', ?, ?)", (str(id), key_of(ctx)))
    return f"closed #{id}"


@server.tool(annotations=ToolAnnotations(destructive_hint=True))
def send_email(to: str, body: str, ctx: Context) -> str:
    """Send an email (cannot be taken back)."""
    db().execute("INSERT INTO effects VALUES ('send_email', ?, ?)", (to, key_of(ctx)))
    return f"sent to {to}"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def whoami(ctx: Context) -> str:
    """Who the server thinks is calling (it quotes the credential it got: a careless server)."""
    headers = ctx.headers or {}
    return f"token {headers.get('authorization') or os.environ.get('TRACKER_TOKEN', 'none')}"


if __name__ == "__main__":
    if sys.argv[1:2] == ["--http"]:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
