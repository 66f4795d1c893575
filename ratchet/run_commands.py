"""`ratchet checkpoints | rollback | fork`: operate on runs through the Temporal client.

The same operations with the plain CLI:
    temporal workflow query  --workflow-id W --name state
    temporal workflow query  --workflow-id W --name rollback_plan --input '"cp-1"'
    temporal workflow update execute --workflow-id W --name rollback --input '{"checkpoint_id": "cp-1"}'
    temporal workflow start --type AgentWorkflow ... --input '{"agent": ..., "resume_from": {...}}'
"""

from __future__ import annotations

import argparse
import asyncio
import json
import uuid

from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.service import RPCError

from ratchet.contracts import AgentState, RollbackPlanItem, RollbackReport, RollbackRequest
from ratchet.settings import load_settings


async def _client() -> Client:
    from worker.main import connect

    return await connect(load_settings())


async def _state(client: Client, workflow_id: str) -> AgentState:
    return await client.get_workflow_handle(workflow_id).query("state", result_type=AgentState)


async def checkpoints(args: argparse.Namespace) -> int:
    state = await _state(await _client(), args.workflow_id)
    if not state.checkpoints:
        print(f"{args.workflow_id}: no checkpoints yet (phase {state.phase}, step {state.step})")
        return 0
    print(f"{'id':<6} {'step':>4}  {'effects':>7}  {'evidence':<40} patch")
    for cp in state.checkpoints:
        ev = cp.evidence
        evidence = f"{' '.join(ev.argv)[:24]} -> exit {ev.exit_code}" if ev else "-"
        if ev and ev.tests_run is not None:
            evidence += f", {ev.tests_run} tests"
        print(f"{cp.id:<6} {cp.step:>4}  {cp.effects_len:>7}  {evidence:<40} {cp.patch_ref.digest[:12] if cp.patch_ref else '-'}")
    return 0


async def rollback(args: argparse.Namespace) -> int:
    client = await _client()
    handle = client.get_workflow_handle(args.workflow_id)
    plan = await handle.query("rollback_plan", args.checkpoint_id, result_type=list[RollbackPlanItem])
    for item in plan:
        print(f"  {item.action:<14} step {item.step:>3} {item.tool:<16} {item.key}")
    if args.dry_run:
        return 0
    try:
        report = await handle.execute_update(
            "rollback", RollbackRequest(checkpoint_id=args.checkpoint_id, then=args.then), result_type=RollbackReport
        )
    except WorkflowUpdateFailedError as exc:
        print(f"rollback refused: {exc.cause}")
        return 1
    print(json.dumps(report.model_dump(), indent=2))
    return 0 if report.clean else 1


async def fork(args: argparse.Namespace) -> int:
    client = await _client()
    source = await _state(client, args.workflow_id)
    run = source.run.model_copy(
        update={"resume_from": {"workflow_id": args.workflow_id, "checkpoint_id": args.checkpoint_id},
                "objective": args.objective or source.run.objective, "workspace": None}
    )
    new_id = args.new_id or f"{args.workflow_id}-fork-{uuid.uuid4().hex[:6]}"
    settings = load_settings()
    await client.start_workflow("AgentWorkflow", run.model_dump(exclude_none=True), id=new_id, task_queue=settings.task_queue)
    print(f"started {new_id} from {args.workflow_id} {args.checkpoint_id}")
    return 0


def register(sub) -> None:
    cmd = sub.add_parser("checkpoints", help="list a run's checkpoints with their evidence")
    cmd.add_argument("workflow_id")
    cmd.set_defaults(fn=_sync(checkpoints))
    cmd = sub.add_parser("rollback", help="undo a run's effects back to a checkpoint")
    cmd.add_argument("workflow_id")
    cmd.add_argument("checkpoint_id")
    cmd.add_argument("--then", choices=["continue", "stop"], default="continue")
    cmd.add_argument("--dry-run", action="store_true", help="only print what would be undone")
    cmd.set_defaults(fn=_sync(rollback))
    cmd = sub.add_parser("fork", help="start a new run from another run's checkpoint")
    cmd.add_argument("workflow_id")
    cmd.add_argument("checkpoint_id")
    cmd.add_argument("--objective", help="objective for the new run (default: the source's)")
    cmd.add_argument("--new-id", help="workflow id of the new run")
    cmd.set_defaults(fn=_sync(fork))


def _sync(fn):
    def run(args: argparse.Namespace) -> int:
        try:
            return asyncio.run(fn(args))
        except RPCError as exc:
            print(f"ratchet: {exc}")
            return 2

    return run
