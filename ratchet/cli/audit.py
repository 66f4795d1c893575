"""`ratchet audit ID [--verify] [--history FILE]`: a run's decisions with their proofs as JSON lines
(ratchet/client/audit.py); `--verify` exits 1 if any signature, claim or digest does not check out,
naming each problem on stderr."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ratchet.cli.verbs import connected


async def audit(args: argparse.Namespace) -> int:
    from temporalio.client import WorkflowHistory

    from ratchet.client.audit import json_lines

    history = None
    if args.history:
        history = WorkflowHistory.from_json(args.workflow_id, Path(args.history).read_text())
    entries = await (await connected()).get(args.workflow_id).audit(history)
    sys.stdout.write(json_lines(entries))
    if not args.verify:
        return 0
    bad = [e for e in entries if e.verified is False]
    for entry in bad:
        print(f"{entry.update} {entry.call_id} (event {entry.event_id}): {'; '.join(entry.problems)}", file=sys.stderr)
    print(f"{len(entries)} decisions, {len(bad)} failed verification", file=sys.stderr)
    return 1 if bad else 0
