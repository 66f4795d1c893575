"""A run's page (state, what it waits for, actions, the conversation, tool effects, checkpoints
with their evidence and patch) and a checkpoint's rollback plan, shown before it is confirmed."""

from __future__ import annotations

from ratchet.client import RunSummary
from ratchet.console.html import diff, esc, folded, form, page, query_url, run_url, table, temporal_link
from ratchet.console.handoffs_view import handoffs_section
from ratchet.console.runs_view import Waiting, waiting_card
from ratchet.contracts import AgentState, Checkpoint, Decision, OutcomeDecision, Message, RollbackPlanItem, Transcript
from ratchet.contracts.rollback import TO_START

TRANSCRIPT_PAGE = 20
CHECKPOINT_PAGE = 10
"""Checkpoints shown whole (evidence, patch) on a run's page, newest first; older ones a page further."""


def shown_checkpoints(state: AgentState, older: int = 0) -> list[Checkpoint]:
    """The checkpoints a run's page shows: CHECKPOINT_PAGE of them, newest first, after the `older` newest."""
    return list(reversed(state.effects.checkpoints.items))[older : older + CHECKPOINT_PAGE]


def waiting_of(state: AgentState) -> list[Waiting]:
    approvals = [
        Waiting(state.workflow_id, "approval", p.call_id, p.tool, p.arguments, p.requested_at, p.reason, p.digest)
        for p in state.calls.pending_approvals
    ]
    decisions = [
        Waiting(state.workflow_id, "decision", d.call_id, d.tool, d.arguments, d.requested_at, d.error, d.digest)
        for d in state.calls.pending_decisions
    ]
    return approvals + decisions


def run_page(
    state: AgentState,
    running: bool,
    transcript: Transcript,
    patches: dict[str, str | None],
    token: str,
    stream_from: int = 0,
    note: tuple[str, str] | None = None,
    older: int = 0,
    *,
    temporal_ui: str,
    billed: str = "",
) -> str:
    """`billed`: the billing section (ratchet/console/cost_view.py)."""
    wid = state.workflow_id
    flash = f'<p class="flash {esc(note[1])}" role=alert>{esc(note[0])}</p>' if note else ""
    waiting = "".join(waiting_card(w, token, back=run_url(wid)) for w in waiting_of(state))
    body = (
        f"<h1>{esc(wid)} <small>{temporal_link(temporal_ui, wid)}</small></h1>{flash}"
        + _summary(state, running)
        + (f"<h2>Waiting for you</h2>{waiting}" if waiting else "")
        + handoffs_section(state, token, running)
        + (_controls(state, token) if running else "<p class=closed>This run has closed.</p>")
        + f'<h2>Live</h2><div id=live data-events="{esc(run_url(wid, "events"))}" '
        f'data-from="{stream_from}" data-running="{int(running)}">'
        "<p class=live-status>not connected</p><pre class=tokens></pre><ol class=steps></ol></div>"
        + _transcript(wid, transcript)
        + billed
        + _effects(state)
        + decisions_table(state)
        + _checkpoints(state, patches, token, older)
    )
    return page(wid, body, script=True)


def sealed_page(run: RunSummary, problem: str, *, temporal_ui: str) -> str:
    """A run whose payloads this console cannot decrypt: what visibility says of it, and why no more."""
    cells = [
        ("agent", run.agent or "-"),
        ("phase", run.phase or "-"),
        ("status", run.status),
        ("step", "-" if run.steps is None else run.steps),
        ("turn", run.turn or "-"),
    ]
    rows = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in cells)
    body = (
        f"<h1>{esc(run.workflow_id)} <small>{temporal_link(temporal_ui, run.workflow_id)}</small></h1>"
        f'<p class="flash error" role=alert>This console cannot read this run: {esc(problem)}. With the '
        "workers' RATCHET_CODEC_KEYS it shows the run's conversation, effects and checkpoints and can act on it; "
        "until then, what Temporal's visibility shows (search attributes are not encrypted):</p>"
        f"<table class=state>{rows}</table>"
    )
    return page(run.workflow_id, body)


def _summary(state: AgentState, running: bool) -> str:
    used = state.used
    cells = [
        ("agent", state.run.agent),
        ("phase", state.phase.value),
        ("status", "running" if running else "closed"),
        ("step", state.step),
        ("turn", state.session.turn_number if state.session.turns.items else "-"),
        ("model calls", used.model_calls),
        ("tokens", f"{used.prompt_tokens + used.completion_tokens:,} ({used.prompt_tokens:,} in)"),
        (
            "cost",
            f"${used.cost_usd:.4f}" + (" (unknown in part: a model without a price)" if used.cost_unknown else ""),
        ),
        ("tool calls", used.tool_calls),
        ("builds", " → ".join(state.release.builds) or "-"),
    ]
    rows = "".join(f"<tr><th>{esc(k)}</th><td id=state-{esc(k.replace(' ', '-'))}>{esc(v)}</td></tr>" for k, v in cells)
    answer = f"<h3>Answer</h3>{folded(state.answer)}" if state.answer else ""
    error = f'<p class="flash error">last error: {esc(state.last_error)}</p>' if state.last_error else ""
    return f"<p class=objective>{esc(state.run.objective)}</p><table class=state>{rows}</table>{answer}{error}"


def _controls(state: AgentState, token: str) -> str:
    base = run_url(state.workflow_id)
    session = state.plan is not None and state.plan.session is not None
    verb, label = ("ask", "Ask") if session else ("send", "Send")
    message = form(
        f"{base}/{verb}",
        token,
        label,
        '<textarea name=text rows=2 required placeholder="a message for the agent"></textarea>',
    )
    paused = state.phase.value == "PAUSED"
    toggle = form(f"{base}/resume", token, "Resume") if paused else form(f"{base}/pause", token, "Pause")
    cancel = form(f"{base}/cancel", token, "Cancel run", danger=True)
    return f"<h2>Act</h2><div class=actions>{message}{toggle}{cancel}</div>"


def _message(index: int, message: Message) -> str:
    marks = []
    if message.summary:
        marks.append("<b class=mark>compaction summary</b>")
    if message.turn:
        marks.append(f"<b class=mark>turn {message.turn}</b>")
    if message.is_error:
        marks.append("<b class='mark error'>error</b>")
    calls = "".join(
        f"<p class=call>→ <code>{esc(c.name)}</code> {esc(c.id)}</p>{folded(c.arguments, 300)}"
        for c in message.tool_calls
    )
    text = folded(message.content or "") if message.content else ""
    role = esc(message.role)
    return f'<li class="msg {role}" value="{index}"><b>{role}</b> {" ".join(marks)}{text}{calls}</li>'


def _transcript(wid: str, part: Transcript) -> str:
    items = "".join(_message(part.offset + i, m) for i, m in enumerate(part.messages))
    links = []
    if part.offset > 0:
        links.append(
            f'<a href="{esc(query_url(run_url(wid), offset=max(0, part.offset - TRANSCRIPT_PAGE)))}">← earlier</a>'
        )
    end = part.offset + len(part.messages)
    if end < part.total:
        links.append(f'<a href="{esc(query_url(run_url(wid), offset=end))}">later →</a>')
    shown = f"messages {part.offset + 1 if part.messages else 0}–{end} of {part.total}"
    return f'<h2>Conversation <small>{shown}</small></h2><ol class=transcript start="{part.offset}">{items}</ol>' + (
        f"<p>{' · '.join(links)}</p>" if links else ""
    )


def _effects(state: AgentState) -> str:
    rows = [
        [
            esc(e.step),
            f"<code>{esc(e.tool)}</code>",
            esc(e.effect.value),
            esc(e.status.value),
            esc(e.undo_description or "-"),
        ]
        for e in state.effects.stack.items
    ]
    return "<h2>Effects</h2>" + table(["step", "tool", "class", "status", "undo"], rows, "No effects yet.")


def decisions_table(state: AgentState) -> str:
    """Every decision the run holds (a person's, a rule's, a grant's) and the grants in force: who
    (subject, issuer, role), when, the digest it is bound to, and whether it was signed (a signed one
    was checked by the run when it was accepted; `ratchet audit --verify` checks it again from the
    history)."""
    calls = state.calls
    decided: list[tuple[str, str, Decision | OutcomeDecision]]
    decided = [(c, "approved" if d.approved else "rejected", d) for c, d in calls.decisions.items()]
    decided += [(c, f"decided {d.choice}", d) for c, d in calls.outcome_decisions.items()]
    rows = [
        [
            f"<code>{esc(call_id)}</code>",
            esc(verdict),
            f"<code>{esc(d.by)}</code>",
            esc(f"{d.subject} ({d.issuer})" if d.subject else "-"),
            esc(d.role or "-"),
            esc(d.at),
            f"<code>{esc(d.digest[:19])}</code>" if d.digest else "-",
            "signed, verified" if d.proof is not None else "unsigned",
        ]
        for call_id, verdict, d in decided
    ]
    headers = ["call", "decision", "by", "subject", "role", "at", "digest", "proof"]
    grants = [
        [esc(g.id), esc("; ".join(p.label() for p in g.patterns)), esc(g.by), esc(g.source), esc(g.expires_at)]
        for g in calls.grants
    ]
    return (
        "<h2>Decisions</h2>"
        + table(headers, rows, "No decisions yet.")
        + (table(["grant", "covers", "by", "given with", "until"], grants, "") if grants else "")
    )


def _checkpoints(state: AgentState, patches: dict[str, str | None], token: str, older: int) -> str:
    base = run_url(state.workflow_id)
    to_start = esc(run_url(state.workflow_id, "checkpoints", TO_START, "rollback"))
    start = f'<p><a href="{to_start}">Plan a rollback to the start</a></p>'
    shown = shown_checkpoints(state, older)
    cards = "".join(_checkpoint(base, c, patches.get(c.id), token) for c in shown)
    total, links = len(state.effects.checkpoints.items), []
    if older > 0:
        links.append(f'<a href="{esc(query_url(base, checkpoints=max(0, older - CHECKPOINT_PAGE)))}">← newer</a>')
    if older + len(shown) < total:
        links.append(f'<a href="{esc(query_url(base, checkpoints=older + len(shown)))}">older checkpoints →</a>')
    counted = f" <small>{older + 1}–{older + len(shown)} of {total}, newest first</small>" if shown else ""
    more = f"<p>{' · '.join(links)}</p>" if links else ""
    return f"<h2>Checkpoints{counted}</h2>{cards or '<p class=empty>No checkpoint yet.</p>'}{more}{start}"


def _checkpoint(base: str, checkpoint: Checkpoint, patch: str | None, token: str) -> str:
    evidence = checkpoint.evidence
    proof = ""
    if evidence is not None:
        counts = (
            f", {evidence.tests_run} tests, {evidence.tests_failed or 0} failed"
            if evidence.tests_run is not None
            else ""
        )
        verdict = "passed" if evidence.passed else "unverified: no test ran" if evidence.no_tests else "failed"
        if evidence.reused:
            verdict += " (the same files passed before: not run again)"
        proof = (
            f"<p class=evidence>{verdict}: "
            f"<code>{esc(' '.join(evidence.argv))}</code> "
            f"exit {evidence.exit_code}{esc(counts)}</p>"
            + (folded(evidence.output, 400) if evidence.output.strip() else "")
        )
    shown = f"<h4>Accepted patch</h4>{diff(patch)}" if patch else "<p class=empty>No file changed.</p>"
    plan = esc(f"{base}/checkpoints/{checkpoint.id}/rollback")
    fork = form(
        f"{base}/checkpoints/{checkpoint.id}/fork",
        token,
        "Fork from here",
        '<input name=objective placeholder="new objective (default: the same)">',
    )
    return (
        f'<section class=checkpoint id="cp-{esc(checkpoint.id)}"><h3>{esc(checkpoint.id)} · step {checkpoint.step}'
        f"{f' · turn {checkpoint.turn}' if checkpoint.turn else ''}</h3><p>{esc(checkpoint.summary)}</p>{proof}{shown}"
        f'<div class=actions><a class=button href="{plan}">Plan a rollback to {esc(checkpoint.id)}</a>'
        f"{fork}</div></section>"
    )


def plan_page(wid: str, checkpoint_id: str, plan: list[RollbackPlanItem], running: bool, token: str) -> str:
    rows = [
        [esc(item.step), f"<code>{esc(item.tool)}</code>", esc(item.action), esc(item.description or item.key)]
        for item in plan
    ]
    undo = sum(1 for item in plan if item.action == "undo")
    then = (
        "<label>then <select name=then><option value=continue>go on from the checkpoint</option>"
        "<option value=stop>stop the run</option></select></label>"
        if running
        else "<p>The run has closed: a rollback workflow undoes its effects.</p>"
    )
    confirm = form(
        run_url(wid, "checkpoints", checkpoint_id, "rollback"),
        token,
        f"Confirm: undo {undo} effect{'s' if undo != 1 else ''}",
        then,
        danger=True,
    )
    body = (
        f'<h1>Roll back <a href="{esc(run_url(wid))}">{esc(wid)}</a> to {esc(checkpoint_id)}</h1>'
        "<p>What the rollback would do, newest first, in the tools' own words. Nothing has changed yet.</p>"
        + table(["step", "tool", "action", "what"], rows, "Nothing to undo after this checkpoint.")
        + confirm
    )
    return page(f"Roll back {wid}", body)
