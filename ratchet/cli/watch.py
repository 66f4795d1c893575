"""`ratchet watch`: a run as it happens, from its stream (`RunHandle.stream`): the model's text as it
is written (`LiveText`: once, also across a retried call), each tool call, approval, decision,
checkpoint, rollback and failover as a line; then the run's view, and the exit status: 0 when it
ended DONE or ROLLED_BACK, 1 otherwise. A closed run shows what its stream retains.
`--once` prints the run's current view (`state` query) and exits.
"""

from __future__ import annotations

import argparse
import json
import sys

from ratchet.cli.verbs import connected
from ratchet.client import LiveText, NotStartedYet, RunFailed, RunHandle
from ratchet.contracts import AgentState, Phase
from ratchet.contracts.events import (
    ApprovalDecided,
    ApprovalRequested,
    CheckpointTaken,
    DecisionRequested,
    HandoffRequested,
    FailedOver,
    Withdrawn,
    PhaseChanged,
    RolledBack,
    RunEnded,
    RunEvent,
    ToolCallFinished,
    ToolCallStarted,
)

ENDED_WELL = (Phase.DONE, Phase.ROLLED_BACK)


async def watch(args: argparse.Namespace) -> int:
    run = (await connected()).get(args.workflow_id)
    if args.once:
        print(await _view(run), flush=True)
        return 0
    text, mid_line, ended = LiveText(), False, None
    text_step: int | None = None  # the step whose text was shown last, with no line since
    async for event in run.stream(from_offset=args.from_offset, topics=args.topics):
        shown = text.feed(event)
        if shown:
            if text_step is not None and event.step != text_step:  # another step's reply: an answer
                sys.stdout.write("\n\n" if mid_line else "\n")  # sent back (its schema) is not glued to the next
            sys.stdout.write(shown)
            sys.stdout.flush()
            mid_line, text_step = not shown.endswith("\n"), event.step
            continue
        line = describe(event, args.workflow_id)
        if line is None:
            continue
        if mid_line:
            print()
            mid_line = False
        text_step = None
        print(line, flush=True)
        if isinstance(event, RunEnded):
            ended = event
    if mid_line:
        print()
    return await _ending(run, ended, answer=not text.steps)


async def _ending(run: RunHandle, ended: RunEnded | None, answer: bool) -> int:
    """The run's view (its answer unless it was shown as it was written) and the exit status, once
    its stream has ended (the run closed)."""
    try:
        print(await _view(run, answer), flush=True)
    except RunFailed:
        pass
    if ended is not None:
        return 0 if ended.phase in ENDED_WELL else 1
    try:  # terminated, or its end was truncated away
        result = await run.result()
    except RunFailed as exc:
        print(f"  failed: {exc.reason}", flush=True)
        return 1
    return 0 if result.phase in ENDED_WELL else 1


async def _view(run: RunHandle, answer: bool = True) -> str:
    try:
        return render(await run.state(), answer)
    except NotStartedYet:
        return f"[{Phase.STARTING}] step 0"


def describe(event: RunEvent, workflow_id: str) -> str | None:
    """One line for a step event (None: the event is text, or not worth a line)."""
    if isinstance(event, PhaseChanged):
        return f"[{event.phase}] step {event.step}"
    if isinstance(event, ToolCallStarted):
        return f"  -> {event.tool} {event.arguments[:100]}  [{event.call}]"
    if isinstance(event, ToolCallFinished):
        return f"  {'ok' if event.ok else 'FAILED'} {event.tool}: {_one_line(event.summary)[:120]}"
    if isinstance(event, ApprovalRequested):
        return (
            f"  awaiting approval: {event.call} {event.tool} {event.arguments[:80]} ({event.reason}); "
            f"`ratchet approve {workflow_id} {event.call}` or `ratchet reject ...`"
        )
    if isinstance(event, ApprovalDecided):
        verdict = "approved" if event.approved else f"rejected ({event.reason})"
        return f"  {event.call} {verdict} by {event.by}"
    if isinstance(event, DecisionRequested):
        return (
            f"  awaiting decision: {event.call} {event.tool} (outcome unknown: {_one_line(event.error)[:80]}); "
            f"`ratchet decide {workflow_id} {event.call} retry|assume_done|skip|fail`"
        )
    if isinstance(event, HandoffRequested):
        return (
            f"  handed to {event.to} by {event.from_agent}: {_one_line(event.summary)[:80]}; "
            f"`ratchet respond {workflow_id} --finish|--reply TEXT | --hand-back {event.from_agent} --notes TEXT`"
        )
    if isinstance(event, CheckpointTaken):
        return f"  checkpoint {event.checkpoint_id} at step {event.step}: {event.evidence}"
    if isinstance(event, RolledBack):
        undid = ", ".join(event.undone) or "nothing"
        left = f"; left in place: {', '.join(event.irreversible)}" if event.irreversible else ""
        failed = f"; NOT undone: {', '.join(event.not_undone)}" if event.not_undone else ""
        return f"  rolled back to {event.checkpoint_id or 'the start'} ({event.reason}): undid {undid}{left}{failed}"
    if isinstance(event, FailedOver):
        return (
            f"  failover at step {event.step}: {event.from_host} -> {event.to_host} "
            f"from {event.checkpoint_id or 'the start'} ({event.reason})"
        )
    if isinstance(event, Withdrawn):
        done = "redacted: the answer is the redacted text" if event.action == "redact" else "the run stops"
        return f"  WITHDRAWN: the text above matched guardrail {event.guardrail} ({done})"
    if isinstance(event, RunEnded):
        return f"[{event.phase}] ended at step {event.step}" + (f": {event.error}" if event.error else "")
    return None


def _one_line(text: str) -> str:
    return " ".join(text.split())


def render(state: AgentState, answer: bool = True) -> str:
    plan = state.plan
    budget = plan.budget if plan else None
    tokens = state.used.prompt_tokens + state.used.completion_tokens
    lines = [
        f"[{state.phase}] step {state.step}"
        + (f"/{budget.max_steps}" if budget else "")
        + f"  tokens {tokens}"
        + (f"/{budget.max_tokens}" if budget else "")
        + f"  cost ${state.used.cost_usd:.4f}  tool calls {state.used.tool_calls}"
        + (f"  continued x{state.continued}" if state.continued else "")
    ]
    for pending in state.calls.pending_approvals:
        lines.append(
            f"  awaiting approval: {pending.call_id} {pending.tool} {json.dumps(pending.arguments)[:80]}"
            f" ({pending.reason})"
        )
    for undecided in state.calls.pending_decisions:
        lines.append(
            f"  awaiting decision: {undecided.call_id} {undecided.tool} {json.dumps(undecided.arguments)[:80]}"
            f" (outcome unknown; `ratchet decide {state.workflow_id} {undecided.call_id} retry|assume_done|skip|fail`)"
        )
    for cp in state.effects.checkpoints.items:
        lines.append(f"  checkpoint {cp.id}: {cp.summary}")
    for move in state.workspace.failovers:
        lines.append(
            f"  failover at step {move.step}: {move.from_host} -> {move.to_host}"
            f" from {move.checkpoint_id or 'the start'}"
            f" ({len(move.restored)} restored, {len(move.undone)} undone, {len(move.irreversible)} left)"
        )
    if state.last_error:  # a run that ended well got past it (an answer sent back for its schema, ...)
        label = "recovered from" if state.phase in ENDED_WELL else "last error"
        lines.append(f"  {label}: {state.last_error[:200]}")
    if state.answer and answer:
        lines.append(f"  answer: {state.answer[:500]}")
    return "\n".join(lines)
