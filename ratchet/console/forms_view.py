"""The start form, the sign-in page and the error page."""

from __future__ import annotations

from collections.abc import Mapping

from ratchet.console.html import esc, form, page, query_url

START_FIELDS = ("agent", "objective", "workspace", "max_steps", "max_cost_usd", "workflow_id", "extra")


def start_page(token: str, values: Mapping[str, str] | None = None, problems: list[str] | None = None) -> str:
    values = values or {}

    def field(name: str, label: str, kind: str = "input", hint: str = "") -> str:
        value = esc(values.get(name, ""))
        control = (
            f'<textarea name={name} rows=3 placeholder="{esc(hint)}">{value}</textarea>'
            if kind == "textarea"
            else f'<input name={name} value="{value}" placeholder="{esc(hint)}">'
        )
        return f"<label>{esc(label)} {control}</label>"

    fields = (
        field("agent", "agent", hint="a profile on the worker: coder, ops, ...")
        + field("objective", "objective", "textarea")
        + field("workspace", "workspace", hint="directory name (default: from the id)")
        + field("max_steps", "max steps", hint="the profile's")
        + field("max_cost_usd", "max cost (USD)", hint="the profile's")
        + field("workflow_id", "run id", hint="default: AGENT-8 hex")
        + field("extra", "more fields as JSON", "textarea", '{"model": {"provider": "..."}}')
    )
    shown = "".join(f"<li>{esc(p)}</li>" for p in problems or [])
    errors = (
        f'<div class="flash error" role=alert><p>The run was not started:</p><ul>{shown}</ul></div>' if shown else ""
    )
    body = (
        "<h1>Start a run</h1><p>Checked as <code>ratchet start</code> checks it.</p>"
        + errors
        + f'<div class="start">{form("/start", token, "Start", fields)}</div>'
    )
    return page("Start", body, nav="Start")


def error_page(status: int, title: str, detail: str) -> str:
    body = f'<h1>{esc(title)}</h1><p class="flash error" role=alert>{esc(detail)}</p><p><a href="/">All runs</a></p>'
    return page(f"{status} {title}", body)


def login_page(token: str, problem: str = "", *, oidc: bool = False, back: str = "/") -> str:
    note = f'<p class="flash error" role=alert>{esc(problem)}</p>' if problem else ""
    start = query_url("/auth/login", next=back if back != "/" else None)
    provider = (
        f'<p><a class=button href="{esc(start)}">Sign in with your organisation\'s account</a></p>' if oidc else ""
    )
    fields = (
        f'<input type=hidden name=next value="{esc(back)}">'
        "<label>token <input name=token type=password autocomplete=current-password required></label>"
    )
    body = (
        f"<h1>Sign in</h1>{note}{provider}<p>Or with a token: the console's (RATCHET_CONSOLE_TOKEN) or your own "
        "(`ratchet users add`).</p>" + form("/login", token, "Sign in", fields)
    )
    return page("Sign in", body)
