"""A shadow batch's page (`/shadows/{batch}`): its report (ratchet/client/shadow_report.py) over the
batch and run by run. Starting and cleaning shadows stays with `ratchet shadow` (or `ratchet mcp`)."""

from __future__ import annotations

from ratchet.client.shadow_report import Call, RunDiff, ShadowReport
from ratchet.console.html import esc, page, run_url, table

TOTALS = ("runs", "same", "diverged", "verifier better", "verifier worse", "cost ratio", "quarantined", "incomplete")


def shadows_page(report: ShadowReport) -> str:
    t = report.totals
    figures = [t.runs, t.same, t.diverged, t.verifier_better, t.verifier_worse, f"{t.cost_ratio:.2f}"]
    totals = table(TOTALS, [[esc(v) for v in (*figures, t.quarantined, t.incomplete)]], "No run.")
    body = (
        f"<h1>Shadow batch {esc(report.batch)}</h1>"
        "<p>Each run started again with the candidate change, in a private copy of its workspace; calls "
        "that would leave it were answered with the original's result or not executed (quarantined).</p>"
        + totals
        + "".join(_run(d) for d in report.runs)
    )
    return page(f"Shadow batch {report.batch}", body)


def _run(d: RunDiff) -> str:
    o, s = d.original, d.shadow
    verdict = "same" if d.same else f"diverged at step {d.diverged_at}"
    verdict += "" if d.complete else " (incomplete)"
    rows = [
        [name, _link(side.workflow_id), esc(side.phase), esc(side.steps), esc(side.tokens), f"{side.cost_usd:.4f}",
         esc(side.verified)]
        for name, side in (("original", o), ("shadow", s))
    ]  # fmt: skip
    headers = ("", "run", "phase", "steps", "tokens", "cost (USD)", "verified")
    parts = [f"<h2>{esc(o.workflow_id)}: {esc(verdict)}</h2>", table(headers, rows, "")]
    if d.departure:  # --model recorded: where the candidate's own reply took over
        parts.append(f"<p>Departs from the recorded replies at step {esc(d.diverged_at)}: {esc(d.departure)}</p>")
    if d.first_divergent_call:
        items = "".join(f"<li>{esc(side)}: {_call(call)}</li>" for side, call in d.first_divergent_call.items())
        parts.append(f"<p>First divergent call:</p><ul>{items}</ul>")
    if d.quarantined:
        items = "".join(f"<li>{esc(c.shadow)}: {_call(c)}</li>" for c in d.quarantined)
        parts.append(f"<p>Not run in the shadow:</p><ul>{items}</ul>")
    if d.answer_diff:
        parts.append(f"<pre class=diff>{esc(d.answer_diff)}</pre>")
    for field, (was, now) in d.output_diff.items():
        parts.append(f"<p>output <code>{esc(field)}</code>: {esc(was)} &rarr; {esc(now)}</p>")
    return "".join(parts)


def _call(call: Call | None) -> str:
    if call is None:
        return "(no call)"
    return f"step {call.step} <code>{esc(call.tool)}</code> <code>{esc(call.arguments[:300])}</code>"


def _link(workflow_id: str) -> str:
    return f'<a href="{run_url(workflow_id)}">{esc(workflow_id)}</a>'
