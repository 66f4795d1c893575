"""Handoffs on the console: a run's handoff records (on its page), a run handed to a person with
the form that answers it, and the page of runs handed to people (`/handoffs?person=alice`)."""

from __future__ import annotations

from ratchet.client import InboxItem
from ratchet.console.html import esc, form, page, run_url, waited
from ratchet.contracts import AgentState
from ratchet.contracts.handoff import Handoff


def record(h: Handoff) -> str:
    """One handoff record: who handed what to whom, and everything it carries."""
    items = "".join(
        f"<li><b>{esc(title)}:</b> {esc(value)}</li>"
        for title, values in (
            ("evidence", h.evidence),
            ("decision", h.decisions),
            ("constraint", h.constraints),
            ("open question", h.open_questions),
        )
        for value in values
    )
    answered = ""
    if h.response is not None:
        to = f" to {h.response.to}" if h.response.to else ""
        answered = (
            f"<p class=answered>{esc(h.response.by)}: {esc(h.response.action)}{esc(to)}: {esc(h.response.text)}</p>"
        )
    return (
        f'<section class=handoff data-to="{esc(h.to_agent)}"><h3>{esc(h.from_agent)} → {esc(h.to_agent)} '
        f"at step {h.step}</h3><p class=objective>{esc(h.objective)}</p><p class=summary>{esc(h.summary)}</p>"
        f"<ul>{items}</ul>{answered}</section>"
    )


def respond_card(workflow_id: str, h: Handoff, token: str, back: str) -> str:
    """The run waiting for a person: its record, and a form to finish, reply or hand back."""
    actions = "".join(
        f'<option value="{value}">{label}</option>'
        for value, label in (
            ("finish", "finish: the text is the answer"),
            ("reply", "reply to the agent"),
            ("hand_back", "hand back to the profile"),
        )
    )
    fields = (
        f'<input type=hidden name=back value="{esc(back)}"><select name=action>{actions}</select>'
        f'<input name=to placeholder="profile (hand back)" value="{esc(h.from_agent)}">'
        '<textarea name=text rows=3 required placeholder="your answer, message or notes"></textarea>'
    )
    return (
        f'<section class=handed data-run="{esc(workflow_id)}"><p><a href="{esc(run_url(workflow_id))}">'
        f"{esc(workflow_id)}</a> · waited {esc(waited(h.at))}</p>{record(h)}"
        f"<div class=actions>{form(run_url(workflow_id, 'respond'), token, 'Respond', fields)}</div>"
        f"<p class=cli>ratchet respond {esc(workflow_id)} --finish|--reply TEXT | --hand-back "
        f"{esc(h.from_agent)} --notes TEXT</p></section>"
    )


def handoffs_section(state: AgentState, token: str, running: bool) -> str:
    """A run page's handoffs: the one waiting for a person (with its form), then every record."""
    if not state.handoffs:
        return ""
    last = state.handoffs[-1]
    card = respond_card(state.workflow_id, last, token, run_url(state.workflow_id)) if running and last.waiting else ""
    return f"<h2>Handoffs</h2>{card}" + "".join(record(h) for h in state.handoffs if not (card and h is last))


def handed_page(items: list[InboxItem], token: str, inbox: str, note: tuple[str, str] | None = None) -> str:
    """The runs handed to people (or to `inbox`: `person:alice`), oldest handoff first."""
    cards = "".join(respond_card(i.workflow_id, i.handoff, token, "/handoffs") for i in items)
    flash = f'<p class="flash {esc(note[1])}" role=alert>{esc(note[0])}</p>' if note else ""
    empty = "" if items else f"<p class=empty>Nothing is handed to {esc(inbox or 'anyone')}.</p>"
    filters = (
        '<form method=get action="/handoffs" class=filters><input name=person placeholder="person">'
        '<input name=role placeholder="role"><button>Show</button></form>'
    )
    title = f"<h1>Handed to {esc(inbox or 'people')} <span class=count>{len(items)}</span></h1>"
    body = f"{title}{flash}{filters}{empty}{cards}"
    return page(f"Handed to people ({len(items)})", body, nav="Handoffs")
