"""`ratchet deploy status | check | ramp | promote | rollback`: a new build to running agents, over
`RatchetClient.deploys` (ratchet/client/deploys.py), for the deployment RATCHET_DEPLOYMENT names;
and `ratchet flag ID REASON`, a run's bad outcome for the ramp guard.

The same routing with the plain Temporal CLI (docs/OPERATIONS.md, "Deploying a new version"):
    temporal worker deployment describe --name D
    temporal worker deployment set-ramping-version --deployment-name D --build-id B --percentage 10
    temporal worker deployment set-current-version --deployment-name D --build-id B
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ratchet.cli.verbs import connected, seconds
from ratchet.client.deploy_reports import DeployCheck, DeployRollback, DeployStatus, Routed, guard_lines


async def deploy(args: argparse.Namespace) -> int:
    """The subcommand `args.deploy_command` names."""
    return await SUBCOMMANDS[args.deploy_command](args)


async def status(args: argparse.Namespace) -> int:
    found = await (await connected()).deploys.status()
    if args.json:
        print(found.model_dump_json(indent=2))
    else:
        print(status_table(found))
    return 0


def status_table(found: DeployStatus) -> str:
    """The deployment in a line, then a row per build: role, Temporal's status, open runs, drained,
    closed runs by phase; then the guard's line if one ran."""
    ramp = f", ramping {found.ramping} at {found.ramp_percentage:g}%" if found.ramping else ""
    back = f"; `deploy rollback` goes back to {found.previous}" if found.previous else ""
    lines = [f"deployment {found.deployment}: current {found.current or 'none'}{ramp}{back}"]
    rows = [("BUILD", "ROLE", "STATUS", "OPEN RUNS", "DRAINED", "OUTCOMES")]
    for v in found.versions:
        role = "current" if v.current else f"ramping {v.ramp_percentage:g}%" if v.ramping else "-"
        drained = "-" if v.drained is None else "yes" if v.drained else "no"
        outcomes = ", ".join(f"{phase} {n}" for phase, n in v.outcomes.items()) or "-"
        rows.append((v.build_id, role, v.status, str(v.open_runs), drained, outcomes))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)) + "  " + row[-1] for row in rows]
    if found.guard is not None:
        first, *rest = guard_lines(found.guard)
        lines += [f"guard: {first}", *(f"  {line}" for line in rest)]
    elif found.guard_problem:
        lines.append(f"guard: {found.guard_problem}")
    return "\n".join(line.rstrip() for line in lines)


async def ramp(args: argparse.Namespace) -> int:
    guard: dict = {}
    if args.guard is not None:
        try:
            guard = {"window_s": seconds(args.window), "steps": percentages(args.steps)}
            guard["interval_s"] = seconds(args.interval)
        except ValueError as exc:
            print(f"ratchet deploy ramp: {exc}", file=sys.stderr)
            return 2
        if args.min_runs is not None:
            guard["min_runs"] = args.min_runs
    routed = await (await connected()).deploys.ramp(args.build, args.percentage, args.guard, **guard)
    print(routed_line(routed))
    if routed.guard:
        print(f"guard {routed.guard} watches it: `ratchet deploy status` shows its state")
    return 0


def percentages(text: str) -> list[float]:
    """`10,50,100`: the guard's steps."""
    try:
        return [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ValueError(f"--steps {text!r}: percentages separated by commas, e.g. 10,50,100") from None


async def promote(args: argparse.Namespace) -> int:
    routed = await (await connected()).deploys.promote(args.build)
    print(routed_line(routed))
    return 0


def routed_line(routed: Routed) -> str:
    ramp = f"; {routed.ramping} ramping at {routed.ramp_percentage:g}% of new runs" if routed.ramping else ""
    before = f" (was {routed.previous})" if routed.previous and not routed.ramping else ""
    stopped = "; its guard stopped" if routed.guard_stopped else ""
    return f"{routed.deployment}: {routed.current} current{before}{ramp}{stopped}{told(routed)}"


def told(routed: Routed) -> str:
    n = routed.sessions_told
    return f"; {n} idle session{'s' if n != 1 else ''} told to move if the routing sends them elsewhere" if n else ""


async def flag(args: argparse.Namespace) -> int:
    flagged = await (await connected()).deploys.flag(args.workflow_id, args.reason)
    print(f"{args.workflow_id} flagged ({flagged}): a ramp guard counts it as a bad outcome of its build")
    return 0


async def rollback(args: argparse.Namespace) -> int:
    done = await (await connected()).deploys.rollback(rerun=args.rerun)
    print(rollback_lines(done))
    return 0 if all(r.rerun for r in done.reruns) else 1


def rollback_lines(done: DeployRollback) -> str:
    how = "its ramp ended" if done.ended_ramp else f"{done.current} current again"
    how += "; its guard stopped" if done.guard_stopped else ""
    lines = [f"{done.deployment}: rolled back from {done.bad}: {how}{told(done)}"]
    for rerun in done.reruns:
        verdict = "rerun" if rerun.rerun else "NOT rerun"
        lines.append(f"  {rerun.workflow_id}: {verdict} from {rerun.checkpoint_id} on {done.current}: {rerun.summary}")
    if not done.reruns:
        lines.append(f"  runs on {done.bad} finish there (--rerun rolls them back and reruns them on {done.current})")
    return "\n".join(lines)


async def check(args: argparse.Namespace) -> int:
    import logging

    from ratchet.replay.candidate import LocalCandidate
    from ratchet.workflows.sdk_seams import WORKFLOW_TASK_LOGGER

    logging.getLogger(WORKFLOW_TASK_LOGGER).setLevel(logging.ERROR)  # the problems say it, once
    client = await connected()
    corpus = [Path(p) for p in args.corpus] if args.corpus is not None else None
    found = await client.deploys.check(args.build, LocalCandidate.from_settings(client.settings, corpus))
    print(found.model_dump_json(indent=2) if args.json else check_lines(found))
    return 0 if found.ok else 1


def check_lines(found: DeployCheck) -> str:
    checked = f"{len(found.runs)} open run(s) that would move to it, {found.corpus} recorded histories"
    if found.ok:
        return f"build {found.build} can take over: {checked} replayed, every moving state readable"
    lines = [f"build {found.build} refused: {len(found.problems)} problem(s) in {checked}"]
    lines += [f"  {problem}" for problem in found.problems]
    lines.append(
        "  a change to what the history records needs `workflow.patched`; else let those runs drain "
        "(`ratchet deploy status`) before it becomes current (docs/OPERATIONS.md)"
    )
    return "\n".join(lines)


SUBCOMMANDS = {"status": status, "check": check, "ramp": ramp, "promote": promote, "rollback": rollback}
