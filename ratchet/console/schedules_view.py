"""The schedules page: every Ratchet schedule (when, what, paused or active, the next firing, the
latest firings with their runs' phases), from `RatchetClient.schedules.list`, each with Pause or
Resume and Trigger now (POST /schedules/{name}/{pause,resume,trigger}: the calls `ratchet schedule`
makes). Creating and deleting stay with `ratchet schedule` (the page shows the command)."""

from __future__ import annotations

from urllib.parse import quote

from ratchet.console.html import esc, form, page, run_url, table
from ratchet.contracts import ScheduleInfo


def schedules_page(found: list[ScheduleInfo], token: str, note: tuple[str, str] | None = None) -> str:
    rows = [_row(s, token) for s in found]
    flash = f'<p class="flash {esc(note[1])}" role=alert>{esc(note[0])}</p>' if note else ""
    headers = ("schedule", "when", "state", "next", "latest firings", "starts", "")
    body = (
        f"<h1>Schedules</h1>{flash}"
        "<p>Runs (or a session's messages) started by time on Temporal Schedules; each firing is an ordinary "
        "run named after its schedule and time. <code>ratchet schedule create NAME --cron '0 7 * * 1-5' AGENT "
        "OBJECTIVE</code> makes one.</p>" + table(headers, rows, "No schedule yet.")
    )
    return page("Schedules", body, nav="Schedules")


def _row(s: ScheduleInfo, token: str) -> list[str]:
    url = "/schedules/" + quote(s.name, safe="")
    nxt = f"{s.next_runs[0]:%Y-%m-%d %H:%M:%S}" if s.next_runs and not s.paused else "-"
    recent = (
        "<br>".join(
            f'<a href="{esc(run_url(r.workflow_id))}">{esc(r.workflow_id)}</a> {esc(r.phase or r.status or "?")}'
            for r in reversed(s.recent[-3:])
        )
        or "-"
    )
    toggle = "resume" if s.paused else "pause"
    buttons = form(f"{url}/{toggle}", token, toggle.capitalize()) + form(f"{url}/trigger", token, "Trigger now")
    state = "paused" if s.paused else "active"
    if s.note:
        state += f" ({s.note})"
    return [esc(s.name), esc(s.when), esc(state), esc(nxt), recent, esc(s.target), buttons]
