"""`ratchet replay`: the deploy gate. Replays histories against today's workflow code.

    ratchet replay tests/histories                       # committed JSON histories (files or folders)
    ratchet replay --server --limit 50                   # live runs (AgentWorkflow, RollbackWorkflow)

Every history gets one verdict: `ok`; NONDETERMINISTIC (today's code takes another path than
the history); FAILED (today's code raises while replaying it); or ERROR (the tool could not get
the history: unreadable file, bad JSON, server unreachable), with the reason. Replay failures
are located in the agent's terms, "step 7, model call" (ratchet/replay/divergence.py). The engine is
ratchet/replay/replayer.py; this module is the command (its arguments: ratchet/cli/table.py).

Exit status: 0 every history replayed, 1 any replay failure, 2 a tool error and no replay failure.
No matching history is success (an idle cluster has nothing to gate), said on a line of its own;
`--min N` makes fewer than N replayed histories a failure (exit 2) on purpose.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from ratchet.replay.outcomes import ERROR, FAILED, NONDETERMINISTIC, Outcome, Progress

DEFAULT_QUERY = 'WorkflowType IN ("AgentWorkflow", "RollbackWorkflow")'


def stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


async def replay_paths(
    paths: Sequence[str | Path],
    workflows: Sequence[type] | None = None,
    server_query: str | None = None,
    limit: int = 100,
    progress: Progress = stderr,
) -> list[Outcome]:
    """Replay history files/folders (and, with `server_query`, live runs) against `workflows`
    (default: the worker's AgentWorkflow and RollbackWorkflow). Settings (TEMPORAL_*, RATCHET_CODEC_KEYS) from the
    environment, as the worker reads them."""
    from ratchet.replay import replayer
    from ratchet.payloads.converter import data_converter
    from ratchet.ops.settings import SettingsError, load_settings

    try:
        settings = load_settings()
    except SettingsError as exc:
        return [Outcome("-", "settings", result=ERROR, detail=str(exc))]
    items = [replayer.load_file(path) for path in replayer.history_files(paths)]
    if server_query is not None:
        items += await replayer.server_histories(settings, server_query, limit, progress)
    progress(f"replaying {sum(not isinstance(i, Outcome) for i in items)} histories")
    return await replayer.replay(items, data_converter(settings), workflows, progress)


def exit_code(outcomes: Sequence[Outcome], minimum: int = 0) -> int:
    results = [o.result for o in outcomes]
    if set(results) & {NONDETERMINISTIC, FAILED}:
        return 1
    replayed = len(results) - results.count(ERROR)
    return 2 if ERROR in results or replayed < minimum else 0


def table(outcomes: Sequence[Outcome]) -> str:
    """Aligned columns (SOURCE: the file, or the server run), then the full reason of each replay
    failure."""
    rows = [("WORKFLOW ID", "EVENTS", "RESULT", "SOURCE", "FIRST DIVERGENCE")]
    for o in outcomes:
        where = o.detail if o.result == ERROR else o.divergence
        rows.append((o.workflow_id, str(o.events) if o.events else "-", o.result, o.source, where))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row[:4], widths)) + "  " + row[4] for row in rows]
    reasons = [f"{o.workflow_id} ({o.source}): {o.detail}" for o in outcomes if o.result in (NONDETERMINISTIC, FAILED)]
    return "\n".join([line.rstrip() for line in lines] + ([""] + reasons if reasons else []))


async def run(args: argparse.Namespace, workflows: Sequence[type] | None = None) -> int:
    """The whole command: replay, print the table, return the exit status."""
    query = args.query if args.server else None
    outcomes = await replay_paths(args.paths, workflows, query, args.limit)
    if outcomes:
        print(table(outcomes), flush=True)
    replayed = sum(o.result != ERROR for o in outcomes)
    if replayed < args.min:
        stderr(f"ratchet replay: {replayed} histories replayed, fewer than --min {args.min}")
    elif not outcomes:
        print("no histories to replay: nothing to check (--min N makes that a failure)", flush=True)
    return exit_code(outcomes, args.min)


def main(args: argparse.Namespace) -> int:
    if not args.paths and not args.server:
        stderr("ratchet replay: give history files or folders, or --server")
        return 2
    from ratchet.workflows.sdk_seams import WORKFLOW_TASK_LOGGER

    # The SDK logs the traceback of every workflow task that fails in replay; the table says it.
    logging.getLogger(WORKFLOW_TASK_LOGGER).setLevel(logging.ERROR)
    return asyncio.run(run(args))
