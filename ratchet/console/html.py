"""The console's HTML, built from plain strings: every value passes `esc` (or `attr`) on its way
in, so nothing a run holds (arguments, tool output, objectives) can become markup."""

from __future__ import annotations

import html
import json
from collections.abc import Iterable
from contextvars import ContextVar
from datetime import datetime, UTC
from typing import Any
from urllib.parse import quote, urlencode


SIGNED_IN: ContextVar[tuple[str, str, str] | None] = ContextVar("signed_in", default=None)
"""Who the page being built is for, set per request by the console's guard: (subject, how, the
page's CSRF token for the sign-out form, empty: no sign-out, the single user or a proxy's); None on
the pages anyone may see."""


def esc(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def run_url(workflow_id: str, *rest: str) -> str:
    return "/runs/" + quote(workflow_id, safe="") + "".join("/" + quote(part, safe="") for part in rest)


def query_url(path: str, **params: Any) -> str:
    kept = {k: v for k, v in params.items() if v not in (None, "")}
    return path + ("?" + urlencode(kept) if kept else "")


def temporal_link(temporal_ui: str, workflow_id: str) -> str:
    """A link to the run in the Temporal Web UI; `temporal_ui` is its namespace's page
    (`Settings.temporal_ui`: RATCHET_TEMPORAL_UI_URL)."""
    href = f"{temporal_ui}/workflows/{quote(workflow_id, safe='')}"
    return f'<a href="{esc(href)}" rel="noreferrer">Temporal</a>'


def page(title: str, body: str, *, nav: str = "", script: bool = False) -> str:
    """A whole page: the nav bar, `body`, and /static/console.js when the page has live parts."""
    scripts = '<script src="/static/console.js" defer></script>' if script else ""
    links = "".join(
        f'<a href="{href}"{" class=here" if nav == name else ""}>{name}</a>'
        for name, href in (
            ("Runs", "/"),
            ("Inbox", "/inbox"),
            ("Handoffs", "/handoffs"),
            ("Start", "/start"),
            ("Schedules", "/schedules"),
            ("Deploys", "/deploys"),
        )
    )
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        f"<title>{esc(title)} · Ratchet</title>"
        '<meta name=viewport content="width=device-width, initial-scale=1">'
        f'<link rel=stylesheet href="/static/console.css">{scripts}</head>'
        f"<body><nav><b>Ratchet console</b>{links}{_who()}</nav><main>{body}</main></body></html>"
    )


def _who() -> str:
    """The nav's `signed in as SUBJECT (how)` and its sign-out button."""
    who = SIGNED_IN.get()
    if who is None:
        return ""
    subject, via, token = who
    out = form("/logout", token, "Sign out") if token and via != "proxy" else ""
    return f"<span class=who>signed in as <b id=signed-in>{esc(subject)}</b> ({esc(via)}){out}</span>"


def form(action: str, token: str, button: str, fields: str = "", *, danger: bool = False) -> str:
    """A POST form to `action` with the CSRF token (ratchet/console/csrf.py) and `fields`."""
    kind = ' class="danger"' if danger else ""
    return (
        f'<form method=post action="{esc(action)}"><input type=hidden name=csrf value="{esc(token)}">'
        f"{fields}<button{kind}>{esc(button)}</button></form>"
    )


def table(headers: Iterable[str], rows: Iterable[Iterable[str]], empty: str) -> str:
    """A table of cells already rendered (escaped by the caller)."""
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    if not body:
        return f"<p class=empty>{esc(empty)}</p>"
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def message_box(text: str, kind: str = "error") -> str:
    return f'<p class="flash {esc(kind)}" role=alert>{esc(text)}</p>'


def pretty(value: Any) -> str:
    return esc(json.dumps(value, indent=2, ensure_ascii=False, default=str))


def folded(text: str, limit: int = 600) -> str:
    """Long text (a tool's output) folded behind a <details>; short text as it is."""
    if len(text) <= limit:
        return f"<pre>{esc(text)}</pre>"
    return f"<details><summary><pre>{esc(text[:limit])}…</pre></summary><pre>{esc(text)}</pre></details>"


def diff(patch: str) -> str:
    """A unified diff, each line classed by its first character (added, removed, hunk)."""
    lines = []
    for line in patch.splitlines():
        kind = {"+": "add", "-": "del", "@": "hunk"}.get(line[:1], "")
        if line.startswith(("+++", "---")):
            kind = "file"
        lines.append(f'<span class="{kind}">{esc(line)}</span>')
    return '<pre class="diff">' + "".join(lines) + "</pre>"  # each line a block of its own


def waited(since: str | datetime | None, now: datetime | None = None) -> str:
    """How long ago `since` (an ISO time or a datetime) was: `42 s`, `3 min`, `2 h 5 min`."""
    if since is None:
        return "-"
    try:
        at = since if isinstance(since, datetime) else datetime.fromisoformat(since)
    except ValueError:
        return esc(since)
    at = at if at.tzinfo else at.replace(tzinfo=UTC)
    seconds = max(0, int(((now or datetime.now(UTC)) - at).total_seconds()))
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"
