"""`ratchet checkpoints | rollback | fork | approve | reject | send | ask | close | watch`: operate on runs.

The same operations with the plain CLI:
    temporal workflow query  --workflow-id W --name state
    temporal workflow query  --workflow-id W --name rollback_plan --input '"cp-1"'
    temporal workflow update execute --workflow-id W --name rollback --input '{"checkpoint_id": "cp-1"}'
    temporal workflow start --type RollbackWorkflow --task-queue ratchet --workflow-id W/rollback/cp-1 \
        --id-reuse-policy AllowDuplicateFailedOnly --input '{"workflow_id": "W", "checkpoint_id": "cp-1"}'
        (a closed run; add "dry_run": true and the id W/rollback/cp-1/dry-run for the dry run)
    temporal workflow start --type AgentWorkflow ... --input '{"agent": ..., "resume_from": {...}}'
    temporal workflow update execute --workflow-id W --name approve --input '{"call_id": "call_3_0"}'
    temporal workflow update execute --workflow-id W --name reject --input '{"call_id": "call_3_0", "reason": "no"}'
    temporal workflow signal --workflow-id W --name send_message --input '"also update the changelog"'
    temporal workflow signal --workflow-id W --name pause     (and --name resume)
    temporal workflow update execute --workflow-id W --name ask --input '{"message_id": "m1", "text": "and then?"}'
    temporal workflow update execute --workflow-id W --name close
"""

from __future__ import annotations

import argparse
import json
import sys

from ratchet.cli.verbs import connected
from ratchet.client import Refused, RollbackOutcome, RunFailed
from ratchet.client.errors import ended
from ratchet.contracts import RollbackPlanItem


async def checkpoints(args: argparse.Namespace) -> int:
    state = await (await connected()).get(args.workflow_id).state()
    if not state.effects.checkpoints.items:
        print(f"{args.workflow_id}: no checkpoints yet (phase {state.phase}, step {state.step})")
        return 0
    print(f"{'id':<6} {'step':>4}  {'effects':>7}  {'evidence':<40} patch")
    for cp in state.effects.checkpoints.items:
        ev = cp.evidence
        evidence = f"{' '.join(ev.argv)[:24]} -> exit {ev.exit_code}" if ev else "-"
        if ev and ev.tests_run is not None:
            evidence += f", {ev.tests_run} tests"
        print(
            f"{cp.id:<6} {cp.step:>4}  {cp.effects_len:>7}  {evidence:<40} "
            f"{cp.patch_ref.digest[:12] if cp.patch_ref else '-'}"
        )
    return 0


async def rollback(args: argparse.Namespace) -> int:
    """A running run rolls back through its `rollback` update; a closed one through a
    `RollbackWorkflow` (workflows/closed_rollback.py): `RunHandle.rollback`."""
    run = (await connected()).get(args.workflow_id)
    if args.then is not None:  # a closed run neither goes on nor stops: say so rather than ignore it
        summary = await run.summary()
        if summary.status != "RUNNING":
            print(
                f"{args.workflow_id} has ended {ended(summary.phase, summary.status)}: its rollback only undoes "
                f"its effects, it cannot --then {args.then}; leave --then out to roll it back"
            )
            return 1
    try:
        outcome = await run.rollback(args.checkpoint_id, then=args.then, dry_run=args.dry_run)
    except Refused as exc:
        print(exc)
        return 1
    except RunFailed as exc:
        print(f"rollback failed ({exc.workflow_id}): {exc.reason}")
        return 1
    return _show_running(outcome) if outcome.running else _show_closed(outcome, args)


def _show_running(outcome: RollbackOutcome) -> int:
    _print_plan(outcome.plan)
    if outcome.report is not None:
        print(json.dumps(outcome.report.model_dump(), indent=2))
    print(outcome.summary())  # a dry run too: what it would undo, the turns it would remove
    return 0 if outcome.complete else 1


def _show_closed(outcome: RollbackOutcome, args: argparse.Namespace) -> int:
    closed = outcome.closed
    assert closed is not None
    if outcome.closed_meanwhile:
        print(f"{args.workflow_id} closed meanwhile: rolling back the closed run")
    if outcome.earlier:
        print(
            f"{args.workflow_id} was rolled back to {args.checkpoint_id} before, by workflow "
            f"{outcome.rollback_workflow_id}; its result:"
        )
    print(
        f"{args.workflow_id} has ended {ended(closed.phase, closed.status)}; rollback workflow "
        f"{outcome.rollback_workflow_id}"
    )
    _print_plan(closed.plan)
    if closed.report is not None:
        print(json.dumps(closed.report.model_dump(), indent=2))
        print(outcome.summary())
    return 0 if outcome.complete else 1


def _print_plan(plan: list[RollbackPlanItem]) -> None:
    if not plan:
        print("  nothing to undo")
    for item in plan:
        print(f"  {item.action:<14} step {item.step:>3} {item.tool:<16} {item.description or '-'}  [{item.key}]")


async def fork(args: argparse.Namespace) -> int:
    forked = await (await connected()).get(args.workflow_id).fork(args.checkpoint_id, args.objective, args.new_id)
    print(f"started {forked.workflow_id} from {args.workflow_id} {args.checkpoint_id}")
    return 0


async def approve(args: argparse.Namespace) -> int:
    """Each call approved on its own (the others of its step keep waiting); exit 1 if any was refused."""
    run = (await connected()).get(args.workflow_id)
    grant = {"for_s": args.grant} if args.grant else None
    failed = 0
    for call_id in args.call_ids:
        failed |= await _answer(run.approve(call_id, grant=grant))
    return failed


async def reject(args: argparse.Namespace) -> int:
    return await _answer((await connected()).get(args.workflow_id).reject(args.call_id, args.reason))


async def _answer(update) -> int:
    """Print an update's answer; a refusal (`approve refused: ...`) exits 1."""
    try:
        print(await update)
    except Refused as exc:
        print(exc)
        return 1
    return 0


async def send(args: argparse.Namespace) -> int:
    await (await connected()).get(args.workflow_id).send(args.text)
    print(f"sent to {args.workflow_id}; it joins the conversation at the next step boundary")
    return 0


async def ask(args: argparse.Namespace) -> int:
    """A session's message; prints the turn's answer (exit 0), or with --no-wait the turn to follow."""
    run = (await connected()).get(args.workflow_id)
    try:
        answer = await run.ask(args.text, message_id=args.message_id, wait=not args.no_wait)
    except Refused as exc:
        print(exc)
        return 1
    if args.no_wait or answer.status is None:
        print(json.dumps(answer.model_dump(mode="json", exclude_none=True)))
        return 0
    if answer.answer is not None:
        print(answer.answer)
    print(f"# turn {answer.turn}: {answer.status}" + (f" ({answer.error})" if answer.error else ""), file=sys.stderr)
    return 0 if answer.status == "answered" else 1


async def close(args: argparse.Namespace) -> int:
    return await _answer((await connected()).get(args.workflow_id).close())
