"""The runs page (filters, one visibility page at a time) and the inbox (every pending approval
and decision across runs, oldest first)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ratchet.client import RunPage, RunSummary
from ratchet.console.html import esc, form, page, pretty, query_url, run_url, table, temporal_link, waited
from ratchet.contracts import Phase
from ratchet.contracts.outcomes import OutcomeChoice

AWAITING = {"": "anything", "approval": "an approval", "decision": "a decision"}
SESSION = {"": "any run", "yes": "sessions", "no": "not sessions"}


@dataclass(frozen=True)
class Progress:
    """What a running run's row shows beside its search attributes: read from its state."""

    step: int
    turn: int
    cost_usd: float


@dataclass(frozen=True)
class RunFilter:
    agent: str = ""
    phase: str = ""
    awaiting: str = ""
    session: str = ""

    def errors(self) -> list[str]:
        wrong = []
        if self.phase and self.phase not in Phase.__members__:
            wrong.append(f"phase: not a phase: {self.phase!r} (one of {', '.join(Phase.__members__)})")
        if self.awaiting not in AWAITING:
            wrong.append(f"awaiting: {self.awaiting!r} is not one of approval, decision")
        if self.session not in SESSION:
            wrong.append(f"session: {self.session!r} is not one of yes, no")
        return wrong

    def client_args(self) -> dict[str, Any]:
        phase = "AWAITING_DECISION" if self.awaiting == "decision" else self.phase
        return {
            "agent": self.agent or None,
            "phase": phase or None,
            "awaiting_approval": True if self.awaiting == "approval" else None,
            "session": {"yes": True, "no": False}.get(self.session),
        }


def runs_page(
    listing: RunPage | None,
    chosen: RunFilter,
    problem: str = "",
    first: bool = True,
    progress: dict[str, Progress] | None = None,
    *,
    temporal_ui: str,
) -> str:
    """`progress`: the running rows' step, turn and cost, from their states (a row missing from it
    shows dashes: its worker did not answer in time); `temporal_ui`: the Web UI's namespace page."""
    rows = []
    for run in listing.runs if listing else []:
        rows.append(
            [
                f'<a href="{esc(run_url(run.workflow_id))}">{esc(run.workflow_id)}</a>',
                esc(run.agent or "-") + (" <b class=mark>session</b>" if run.session else ""),
                esc(run.phase or "-") + (" <b class=waiting>awaiting approval</b>" if run.awaiting_approval else ""),
                esc(run.status),
                esc(run.tenant or "-") + (f" <small>p{run.priority}</small>" if run.priority else ""),
                *_progress(run, (progress or {}).get(run.workflow_id)),
                esc(waited(run.start_time)) + " ago",
                temporal_link(temporal_ui, run.workflow_id),
            ]
        )
    more = ""
    if listing and listing.next_page:
        more = f'<a class=more href="{esc(query_url("/", **vars(chosen), page=listing.next_page))}">older runs →</a>'
    if not first:
        more = '<a href="' + esc(query_url("/", **vars(chosen))) + '">← newest</a> ' + more
    body = (
        "<h1>Runs</h1>"
        + _filters(chosen)
        + (f'<p class="flash error" role=alert>{esc(problem)}</p>' if problem else "")
        + table(
            ["run", "agent", "phase", "status", "tenant", "step", "turn", "budget used", "started", ""],
            rows,
            "No runs match.",
        )
        + f"<p>{more}</p>"
    )
    return page("Runs", body, nav="Runs")


def _progress(run: RunSummary, live: Progress | None) -> list[str]:
    """Step, turn and cost: a run thinking or acting from its state (dashes if its worker did not
    answer: its search attributes hold them as of its last wait), any other from its search attributes."""
    if live is not None:
        step, turn, cost = live.step, live.turn or None, live.cost_usd
    elif run.status == "RUNNING" and run.phase in (None, "RUNNING"):
        step, turn, cost = None, run.turn, None
    else:
        step, turn, cost = run.steps, run.turn, run.cost_usd
    turn = turn if run.session else None
    return [esc("-" if step is None else step), esc(turn or "-"), esc("-" if cost is None else f"${cost:.4f}")]


def _filters(chosen: RunFilter) -> str:
    phases = "".join(
        f'<option{" selected" if chosen.phase == p else ""} value="{esc(p)}">{esc(p or "any")}</option>'
        for p in ["", *Phase.__members__]
    )
    awaiting = "".join(
        f'<option{" selected" if chosen.awaiting == k else ""} value="{esc(k)}">{esc(v)}</option>'
        for k, v in AWAITING.items()
    )
    session = "".join(
        f'<option{" selected" if chosen.session == k else ""} value="{esc(k)}">{esc(v)}</option>'
        for k, v in SESSION.items()
    )
    return (
        '<form method=get action="/" class=filters>'
        f'<label>agent <input name=agent value="{esc(chosen.agent)}"></label>'
        f"<label>phase <select name=phase>{phases}</select></label>"
        f"<label>awaiting <select name=awaiting>{awaiting}</select></label>"
        f"<label>show <select name=session>{session}</select></label>"
        "<button>Filter</button></form>"
    )


GRANT_CHOICE = (
    "<select name=grant title='also approve later calls of this tool, in this run'>"
    "<option value=''>this call only</option><option value=3600>and this tool for 1 h</option>"
    "<option value=86400>and this tool for 1 day</option></select>"
)
"""An approval may carry a grant (ratchet/contracts/approval_policy.py): later calls of the tool run
without asking for that long."""


@dataclass(frozen=True)
class Waiting:
    """One pending approval or decision of a run."""

    workflow_id: str
    kind: str
    """"approval" or "decision"."""
    call_id: str
    tool: str
    arguments: dict[str, Any]
    requested_at: str
    why: str
    """The rule that asked for approval, or the error that left the outcome unknown."""
    digest: str = ""
    """The call's digest as this page shows it: a signed decision covers it (docs/SECURITY.md)."""


def inbox_page(waiting: list[Waiting], token: str, problems: list[str], note: tuple[str, str] | None = None) -> str:
    items = sorted(waiting, key=lambda w: w.requested_at)
    cards = "".join(waiting_card(w, token, back="/inbox") for w in items)
    notes = f'<p class="flash {esc(note[1])}" role=alert>{esc(note[0])}</p>' if note else ""
    notes += "".join(f'<p class="flash warn">{esc(p)}</p>' for p in problems)
    empty = "" if items else "<p class=empty>Nothing is waiting for a person.</p>"
    body = f"<h1>Inbox <span class=count>{len(items)}</span></h1>{notes}{empty}{cards}"
    return page(f"Inbox ({len(items)})", body, nav="Inbox")


def waiting_card(w: Waiting, token: str, back: str) -> str:
    base = run_url(w.workflow_id)
    hidden = (
        f'<input type=hidden name=call_id value="{esc(w.call_id)}"><input type=hidden name=back value="{esc(back)}">'
        f'<input type=hidden name=digest value="{esc(w.digest)}">'
    )
    if w.kind == "approval":
        actions = form(base + "/approve", token, "Approve", hidden + GRANT_CHOICE) + form(
            base + "/reject",
            token,
            "Reject",
            hidden + '<input name=reason placeholder="reason (the model is told)" required>',
            danger=True,
        )
        label = "needs approval"
    else:
        choices = "".join(f'<option value="{c.value}">{c.value}</option>' for c in OutcomeChoice)
        actions = form(
            base + "/decide",
            token,
            "Decide",
            hidden
            + f"<select name=choice>{choices}</select>"
            + '<input name=result placeholder="result (assume_done)"><input name=reason placeholder="reason">',
        )
        label = "outcome unknown"
    return (
        f'<section class="waiting-call" data-call="{esc(w.call_id)}">'
        f'<h3><a href="{esc(base)}">{esc(w.workflow_id)}</a> · <code>{esc(w.tool)}</code> {label} · '
        f"waited {esc(waited(w.requested_at))}</h3>"
        f"<p class=rule>{esc(w.why)}</p><pre>{pretty(w.arguments)}</pre>"
        f"<div class=actions>{actions}</div><p class=cli>ratchet {'approve' if w.kind == 'approval' else 'decide'} "
        f"{esc(w.workflow_id)} {esc(w.call_id)}</p></section>"
    )
