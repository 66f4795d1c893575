"""The deploys page: the worker deployment's builds (which is current, which ramping at what
percentage, the runs open on each, drained or not, their outcomes) and the ramp guard's state, from
`RatchetClient.deploys.status` (ratchet/client/deploys.py). Changing the routing stays with
`ratchet deploy` (docs/OPERATIONS.md, "Deploying a new version"): the page shows the commands."""

from __future__ import annotations

from ratchet.client.deploy_reports import DeployStatus, VersionStatus, guard_lines
from ratchet.console.html import esc, page, table


def deploys_page(status: DeployStatus) -> str:
    ramp = (
        f", <b>{esc(status.ramping)}</b> ramping at {esc(f'{status.ramp_percentage:g}')}% of new runs"
        if status.ramping
        else ""
    )
    rows = [_row(v) for v in reversed(status.versions)]  # newest first
    headers = ("build", "role", "Temporal status", "open runs", "drained", "outcomes", "last current")
    back = (
        f"<p><code>ratchet deploy rollback</code> makes <b>{esc(status.previous)}</b> current again "
        "(<code>--rerun</code>: the open runs of the build rolled back from rerun on it).</p>"
        if status.previous
        else ""
    )
    body = (
        f"<h1>Deploys <small>deployment {esc(status.deployment)}</small></h1>"
        f"<p>New runs start on <b>{esc(status.current or 'no build yet')}</b>{ramp}. One-shot runs finish on the "
        "build they started on; sessions move to the new build at their next turn boundary.</p>"
        + table(headers, rows, "No build of this deployment has polled yet.")
        + back
        + f"<h2>Ramp guard</h2>{_guard(status)}"
    )
    return page("Deploys", body, nav="Deploys")


def _row(v: VersionStatus) -> list[str]:
    role = "current" if v.current else f"ramping {v.ramp_percentage:g}%" if v.ramping else "-"
    drained = "-" if v.drained is None else "yes" if v.drained else "no"
    outcomes = ", ".join(f"{esc(phase)} {n}" for phase, n in v.outcomes.items()) or "-"
    last = f"{v.last_current:%Y-%m-%d %H:%M:%S}" if v.last_current else "never"
    return [f"<code>{esc(v.build_id)}</code>", esc(role), esc(v.status), str(v.open_runs), drained, outcomes, esc(last)]


def _guard(status: DeployStatus) -> str:
    guard = status.guard
    if guard is None and status.guard_problem:
        return f"<p>{esc(status.guard_problem)}</p>"
    if guard is None:
        ramp = "<code>ratchet deploy ramp BUILD 10 --guard ...</code>"
        return f"<p class=empty>No guard has run for this deployment ({ramp} starts one).</p>"
    return f"<pre class=guard>{esc(chr(10).join(guard_lines(guard)))}</pre>"
