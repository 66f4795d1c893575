"""`ratchet checkpoints | rollback | fork | approve | reject | send | watch`: operate on runs.

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
"""

from __future__ import annotations

import argparse
import asyncio
import json
import uuid

from temporalio.client import (
    Client, WorkflowExecutionStatus, WorkflowFailureError, WorkflowHandle, WorkflowQueryFailedError, WorkflowUpdateFailedError,
)
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError

from ratchet.contracts import (
    ROLLBACK_WORKFLOW, TO_START, AgentState, ApproveRequest, ClosedRollback, Phase, RejectRequest, RollbackPlanItem,
    RollbackReport, RollbackRequest, RollbackRun, rollback_id,
)
from ratchet.cli.verbs import verb, workflow_id
from ratchet.ops.settings import load_settings
from ratchet.contracts import AGENT_WORKFLOW
from ratchet.workflows.agent import AgentWorkflow


async def _client() -> Client:
    from ratchet.plugin import connect

    return await connect(load_settings())


async def _state(client: Client, workflow_id: str) -> AgentState:
    return await client.get_workflow_handle(workflow_id).query(AgentWorkflow.state)


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
    """A running run rolls back through its `rollback` update; a closed one through a
    `RollbackWorkflow` (workflows/closed_rollback.py)."""
    client = await _client()
    handle = client.get_workflow_handle(args.workflow_id)
    if await _running(handle):
        try:
            return await _rollback_running(handle, args)
        except RPCError:
            if await _running(handle):
                raise
            print(f"{args.workflow_id} closed meanwhile: rolling back the closed run")
    return await _rollback_closed(client, args)


async def _running(handle: WorkflowHandle) -> bool:
    return (await handle.describe()).status == WorkflowExecutionStatus.RUNNING


async def _rollback_running(handle: WorkflowHandle, args: argparse.Namespace) -> int:
    try:
        plan = await handle.query(AgentWorkflow.rollback_plan, args.checkpoint_id)
        if any(item.action == "archived" for item in plan):
            plan = await _with_archived(handle, args.checkpoint_id)
    except WorkflowQueryFailedError as exc:
        print(f"rollback refused: {exc}")
        return 1
    _print_plan(plan)
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


async def _with_archived(handle: WorkflowHandle, checkpoint_id: str) -> list[RollbackPlanItem]:
    """The plan with the effects a long run archived listed one by one, read from the artifact
    store (workflows/effects_archive.py), as the rollback itself will load them."""
    from ratchet.activities.archive import load_archived
    from ratchet.stores.urls import open_artifacts
    from ratchet.workflows import checkpoints, saga

    state = await handle.query(AgentWorkflow.state)
    store = open_artifacts(load_settings().artifact_store_url)
    state.unarchive(await asyncio.to_thread(load_archived, store, state.effects_archive))
    return saga.rollback_plan(state, state.plan, checkpoints.boundary(state, checkpoint_id))


async def _rollback_closed(client: Client, args: argparse.Namespace) -> int:
    """Start (or join) the closed run's `RollbackWorkflow` under the id derived from the request: a
    rollback that completed before is not run again, its result is shown."""
    request = RollbackRun(workflow_id=args.workflow_id, checkpoint_id=args.checkpoint_id, dry_run=args.dry_run)
    workflow_id = rollback_id(request.workflow_id, request.checkpoint_id, request.dry_run)
    reuse = WorkflowIDReusePolicy.ALLOW_DUPLICATE if args.dry_run else WorkflowIDReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY
    try:
        handle = await client.start_workflow(
            ROLLBACK_WORKFLOW, request, id=workflow_id, task_queue=load_settings().task_queue, result_type=ClosedRollback,
            id_reuse_policy=reuse, id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        )
    except WorkflowAlreadyStartedError:
        handle = client.get_workflow_handle(workflow_id, result_type=ClosedRollback)
        print(f"{args.workflow_id} was rolled back to {args.checkpoint_id} before, by workflow {workflow_id}; its result:")
    try:
        result = await handle.result()
    except WorkflowFailureError as exc:
        print(f"rollback failed ({workflow_id}): {getattr(exc.cause, 'message', exc.cause)}")
        return 1
    print(f"{args.workflow_id}: closed {result.status} ({result.phase}); rollback workflow {workflow_id}")
    _print_plan(result.plan)
    if result.report is not None:
        print(json.dumps(result.report.model_dump(), indent=2))
    return 0


def _print_plan(plan: list[RollbackPlanItem]) -> None:
    if not plan:
        print("  nothing to undo")
    for item in plan:
        print(f"  {item.action:<14} step {item.step:>3} {item.tool:<16} {item.description or '-'}  [{item.key}]")


async def fork(args: argparse.Namespace) -> int:
    client = await _client()
    source = await _state(client, args.workflow_id)
    run = source.run.model_copy(
        update={"resume_from": {"workflow_id": args.workflow_id, "checkpoint_id": args.checkpoint_id},
                "objective": args.objective or source.run.objective, "workspace": None}
    )
    new_id = args.new_id or f"{args.workflow_id}-fork-{uuid.uuid4().hex[:6]}"
    settings = load_settings()
    await client.start_workflow(AGENT_WORKFLOW, run.model_dump(exclude_none=True), id=new_id, task_queue=settings.task_queue)
    print(f"started {new_id} from {args.workflow_id} {args.checkpoint_id}")
    return 0


def register(sub) -> None:
    register_background(sub)
    cmd = verb(sub, "checkpoints", "list a run's checkpoints with their evidence (tests run, patch)",
               "ratchet checkpoints fix-42")
    workflow_id(cmd)
    cmd.set_defaults(fn=_sync(checkpoints))
    cmd = verb(
        sub, "rollback", "undo a run's effects back to a checkpoint (a running or a closed run)",
        "ratchet rollback fix-42 cp-1 --dry-run\n         ratchet rollback fix-42 cp-1 --then stop",
        description="Undo a run's effects after a checkpoint, newest first, each at most once. A running run "
        "interrupts its step and rolls back; a closed one (DONE, FAILED, cancelled, ...) through a "
        f"{ROLLBACK_WORKFLOW} with id RUN/rollback/CHECKPOINT.",
    )
    workflow_id(cmd)
    cmd.add_argument("checkpoint_id", help=f"a checkpoint (`ratchet checkpoints`); for a closed run also {TO_START!r}: every effect")
    cmd.add_argument("--then", choices=["continue", "stop"], default="continue",
                     help="a running run: go on from the checkpoint or stop (default: %(default)s)")
    cmd.add_argument("--dry-run", action="store_true", help="only print what would be undone")
    cmd.set_defaults(fn=_sync(rollback))
    cmd = verb(sub, "fork", "start a new run from another run's checkpoint (its state and workspace files)",
               "ratchet fork fix-42 cp-1 --objective 'try another approach'")
    workflow_id(cmd)
    cmd.add_argument("checkpoint_id", help="the source run's checkpoint (`ratchet checkpoints`)")
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


async def approve(args: argparse.Namespace) -> int:
    return await _decide(args.workflow_id, "approve", ApproveRequest(call_id=args.call_id))


async def reject(args: argparse.Namespace) -> int:
    return await _decide(args.workflow_id, "reject", RejectRequest(call_id=args.call_id, reason=args.reason))


async def _decide(workflow_id: str, update: str, request) -> int:
    handle = (await _client()).get_workflow_handle(workflow_id)
    try:
        print(await handle.execute_update(update, request, result_type=str))
    except WorkflowUpdateFailedError as exc:
        print(f"{update} refused: {exc.cause}")
        return 1
    return 0


async def send(args: argparse.Namespace) -> int:
    await (await _client()).get_workflow_handle(args.workflow_id).signal("send_message", args.text)
    print(f"sent to {args.workflow_id}; it joins the conversation at the next step boundary")
    return 0


async def watch(args: argparse.Namespace) -> int:
    """Live view: phase, step, budget, pending approvals, checkpoints, until the run closes."""
    client = await _client()
    handle = client.get_workflow_handle(args.workflow_id)
    last = ""
    while True:
        state = await _state(client, args.workflow_id)
        view = render(state)
        if view != last:
            print(view, flush=True)
            last = view
        if state.phase.terminal or args.once:
            return 0 if state.phase in (Phase.DONE, Phase.ROLLED_BACK) or args.once else 1
        description = await handle.describe()
        if description.status is not None and description.status.name != "RUNNING":
            return 1
        await asyncio.sleep(args.interval)


def render(state: AgentState) -> str:
    plan = state.plan
    budget = plan.budget if plan else None
    tokens = state.used.prompt_tokens + state.used.completion_tokens
    lines = [
        f"[{state.phase}] step {state.step}"
        + (f"/{budget.max_steps}" if budget else "")
        + f"  tokens {tokens}" + (f"/{budget.max_tokens}" if budget else "")
        + f"  cost ${state.used.cost_usd:.4f}  tool calls {state.used.tool_calls}"
        + (f"  continued x{state.continued}" if state.continued else "")
    ]
    for pending in state.pending_approvals:
        lines.append(f"  awaiting approval: {pending.call_id} {pending.tool} {json.dumps(pending.arguments)[:80]} ({pending.reason})")
    for pending in state.pending_decisions:
        lines.append(f"  awaiting decision: {pending.call_id} {pending.tool} {json.dumps(pending.arguments)[:80]}"
                     f" (outcome unknown; `ratchet decide {state.workflow_id} {pending.call_id} retry|assume_done|skip|fail`)")
    for cp in state.checkpoints:
        lines.append(f"  checkpoint {cp.id}: {cp.summary}")
    for move in state.failovers:
        lines.append(
            f"  failover at step {move.step}: {move.from_host} -> {move.to_host} from {move.checkpoint_id or 'the start'}"
            f" ({len(move.restored)} restored, {len(move.undone)} undone, {len(move.irreversible)} left)"
        )
    if state.last_error:
        lines.append(f"  last error: {state.last_error[:200]}")
    if state.answer:
        lines.append(f"  answer: {state.answer[:500]}")
    return "\n".join(lines)


def register_background(sub) -> None:
    cmd = verb(sub, "approve", "approve a tool call waiting for a person (AWAITING_APPROVAL)",
               "ratchet approve ops-7 call_3_0")
    workflow_id(cmd)
    cmd.add_argument("call_id", help="the waiting call (`ratchet watch` lists them)")
    cmd.set_defaults(fn=_sync(approve))
    cmd = verb(sub, "reject", "reject a tool call waiting for a person; the reason goes to the model",
               "ratchet reject ops-7 call_3_1 --reason 'not during business hours'")
    workflow_id(cmd)
    cmd.add_argument("call_id", help="the waiting call (`ratchet watch` lists them)")
    cmd.add_argument("--reason", default="rejected by a person", help="what the model is told (default: %(default)r)")
    cmd.set_defaults(fn=_sync(reject))
    cmd = verb(sub, "send", "send the agent a message (it joins the conversation at the next step boundary)",
               "ratchet send ops-7 'also update the runbook'")
    workflow_id(cmd)
    cmd.add_argument("text", help="the message")
    cmd.set_defaults(fn=_sync(send))
    cmd = verb(sub, "watch", "live view of a run (phase, step, budget, waiting calls, checkpoints) until it ends",
               "ratchet watch ops-7 --once")
    workflow_id(cmd)
    cmd.add_argument("--interval", type=float, default=1.0, help="seconds between refreshes (default: %(default)s)")
    cmd.add_argument("--once", action="store_true", help="print the current view and exit")
    cmd.set_defaults(fn=_sync(watch))
