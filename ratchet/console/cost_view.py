"""A run's billed cost on its console page: every model attempt by cause (ratchet/client/costs.py)."""

from __future__ import annotations

from ratchet.client.costs import CostReport
from ratchet.console.html import esc, message_box, table


def cost_section(report: CostReport | str) -> str:
    """The section, or (a string) why the billing ledger could not be read."""
    if isinstance(report, str):
        return "<h2>Billed</h2>" + message_box(f"the billing ledger could not be read: {report}")
    rows = [
        [
            esc(cause),
            esc(b.attempts),
            esc(f"{b.prompt_tokens:,}"),
            esc(f"{b.completion_tokens:,}"),
            esc(f"{b.cache_read_tokens + b.cache_write_tokens:,}"),
            esc(f"${b.cost_usd:.4f}"),
        ]
        for cause, b in sorted(report.by_cause.items())
    ]
    notes = ""
    if report.total.estimated:
        notes += "<p>Some usage is estimated: the provider sent none for an attempt that failed while it wrote.</p>"
    if report.unpriced:
        notes += f"<p>Cost unknown for {esc(', '.join(report.unpriced))}: no price (counted as $0).</p>"
    head = ["cause", "attempts", "prompt", "completion", "cached", "USD"]
    return (
        f"<h2 id=billed>Billed <small>${report.total.cost_usd:.4f}, {report.total.attempts} attempts</small></h2>"
        + table(head, rows, "No model attempt billed yet.")
        + notes
    )
