"""`ratchet cost ID`: what a run was billed (ratchet/client/costs.py), as a table or JSON."""

from __future__ import annotations

import argparse

from ratchet.cli.verbs import connected
from ratchet.client.costs import CostReport
from ratchet.contracts import Billed

HEAD = ("step", "cause", "model", "attempts", "failed", "prompt", "completion", "cache read", "cache write", "USD")


async def cost(args: argparse.Namespace) -> int:
    found = await (await connected()).get(args.workflow_id).cost()
    print(found.model_dump_json(indent=2) if args.json else table(found))
    return 0


def table(found: CostReport) -> str:
    rows: list[tuple[str, ...]] = [HEAD]
    for line in found.lines:
        b = line.billed
        rows.append(
            (str(line.step), line.cause, f"{line.provider}/{line.model}", str(b.attempts), str(line.failed))
            + _numbers(b)
        )
    t = found.total
    rows.append(("total", "", "", str(t.attempts), str(sum(x.failed for x in found.lines))) + _numbers(t))
    widths = [max(len(r[i]) for r in rows) for i in range(len(HEAD))]
    out = ["  ".join(c.ljust(w) if i < 3 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))) for r in rows]
    if not found.lines:
        out = [f"{found.workflow_id}: nothing billed (no model attempt in the billing ledger)"]
    if t.estimated:
        out.append("some usage is estimated (the provider sent none for an attempt that failed while it wrote)")
    if found.unpriced:
        out.append(f"cost unknown: no price for {', '.join(found.unpriced)} (counted as $0; RATCHET_PRICES_FILE)")
    return "\n".join(out)


def _numbers(b: Billed) -> tuple[str, ...]:
    tokens = (b.prompt_tokens, b.completion_tokens, b.cache_read_tokens, b.cache_write_tokens)
    return tuple(str(n) for n in tokens) + (f"{b.cost_usd:.6f}",)
