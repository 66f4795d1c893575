"""`ratchet start | list | result | cancel | transcript | decide`: the basics, without switching to the
`temporal` CLI.

The same with the plain CLI:
    temporal workflow start --type AgentWorkflow --task-queue ratchet --workflow-id W \\
        --input '{"agent": "coder", "objective": "..."}'
    temporal workflow list --query 'WorkflowType="AgentWorkflow" AND RatchetPhase="AWAITING_APPROVAL"'
    temporal workflow result --workflow-id W
    temporal workflow cancel --workflow-id W
    temporal workflow query --workflow-id W --name transcript --input '{"offset": 0, "limit": 20}'
    temporal workflow update execute --workflow-id W --name decide --input '{"call_id": "call_3_0", "choice": "retry"}'
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ratchet.cli.watch import watch
from ratchet.cli.verbs import connected
from ratchet.client import (
    IdInUse,
    InvalidInput,
    RatchetError,
    Refused,
    RunFailed,
    RunHandle,
    RunSummary,
    validated_run,
)
from ratchet.contracts import AgentRun, Phase


SCRIPTED = "scripted"
"""The offline provider (ratchet/models/scripted.py) `--script` gives its replies to."""


class InvalidRun(Exception):
    """The run given to `ratchet start` cannot be read or is not a valid AgentRun."""


def run_from(args: argparse.Namespace) -> AgentRun:
    """The run described by `--file` (a JSON object, as `temporal workflow start --input` takes),
    with AGENT, OBJECTIVE and flags given on the command line taking precedence."""
    fields: dict = {}
    if args.file:
        try:
            fields = json.loads(Path(args.file).read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise InvalidRun(f"cannot read {args.file}: {exc}") from None
        if not isinstance(fields, dict):
            raise InvalidRun(f"{args.file} must hold a JSON object (the run), not {type(fields).__name__}")
    for name in ("agent", "objective", "workspace", "tenant", "priority"):
        if getattr(args, name) is not None:
            fields[name] = getattr(args, name)
    if args.max_steps is not None:
        fields.setdefault("budget", {})["max_steps"] = args.max_steps
    if args.session:
        fields.setdefault("session", {})
    if args.provider or args.model or args.script:
        given = fields.get("model") or {}
        if isinstance(given, dict):  # else left to the run's validation, which names the field
            fields["model"] = {**given, **model_flags(args)}
    try:
        return validated_run(fields)
    except InvalidInput as exc:
        raise InvalidRun(str(exc)) from None


def model_flags(args: argparse.Namespace) -> dict:
    """The run's `model` settings from --provider, --model and --script (a JSON file of the scripted
    provider's replies, given to the run inline: it implies --provider scripted)."""
    model: dict = {}
    if args.provider:
        model["provider"] = args.provider
    if args.model:
        model["model"] = args.model
    if args.script:
        if model.setdefault("provider", SCRIPTED) != SCRIPTED:
            raise InvalidRun(f"--script is the {SCRIPTED} provider's, not {args.provider!r}'s")
        try:
            model["options"] = {"script": json.loads(Path(args.script).read_text())}
        except (OSError, json.JSONDecodeError) as exc:
            raise InvalidRun(f"cannot read --script {args.script}: {exc}") from None
    return model


async def start(args: argparse.Namespace) -> int:
    try:
        run = run_from(args)
    except InvalidRun as exc:
        print(f"ratchet start: {exc}", file=sys.stderr)
        return 2
    try:
        handle = await (await connected()).start(run, args.id, new_run=args.new_run)
    except IdInUse as exc:
        hint = "--new-run starts a new run under the same id" if exc.closed else "choose another --id"
        print(f"ratchet start: {exc.reason}; {hint}", file=sys.stderr)
        return 1
    except Refused as exc:
        print(f"ratchet start: {exc.reason}", file=sys.stderr)
        return 2
    print(f"started {handle.workflow_id}", flush=True)
    if args.follow:
        return await watch(argparse.Namespace(workflow_id=handle.workflow_id, once=False, from_offset=0, topics=None))
    try:
        planned = await handle.planned()
    except RunFailed as exc:
        print(f"ratchet start: {handle.workflow_id} failed at once: {exc.reason}", file=sys.stderr)
        return 1
    if not planned:
        print(
            f"ratchet start: {handle.workflow_id} is not planned yet: is a worker (`ratchet worker`) running on "
            f"task queue {handle.client.settings.task_queue!r}? `ratchet watch {handle.workflow_id}` follows it",
            file=sys.stderr,
        )
    return 0


async def list_runs(args: argparse.Namespace) -> int:
    client = await connected()
    runs = await client.list(
        agent=args.agent, phase=args.phase, running=args.running, limit=args.limit, tenant=args.tenant
    )
    print(f"{'workflow id':<36} {'status':<11} {'agent':<14} {'phase':<18} {'tenant':<14} {'prio':<4} started")
    for run in runs:
        started = f"{run.start_time:%Y-%m-%d %H:%M:%S}" if run.start_time else "-"
        tenant, priority = run.tenant or "-", run.priority or "-"
        handed = f"  handed to {run.handed_to}" if run.handed_to else ""
        print(
            f"{run.workflow_id:<36} {run.status:<11} {run.agent or '-':<14} {run.phase or '-':<18} "
            f"{tenant:<14} {priority!s:<4} {started}{handed}"
        )
    if not runs:
        print("(no runs match)")
    return 0


async def result(args: argparse.Namespace) -> int:
    run = (await connected()).get(args.workflow_id)
    summary = await run.summary()  # RunNotFound
    if summary.status == "RUNNING":
        waits = await waiting_for(run, summary)
        if args.no_wait:
            print(f"{args.workflow_id}: still running ({summary.phase or 'STARTING'}){waits}")
            return 3
        if waits:  # it may wait for a person for days: say for what, then wait
            print(f"# {args.workflow_id} is running ({summary.phase}){waits}", file=sys.stderr, flush=True)
            print("# waiting for its end (--no-wait: return at once)", file=sys.stderr, flush=True)
    try:
        outcome = await run.result()
    except RunFailed as exc:
        print(f"{args.workflow_id}: {exc.reason}")
        return 1
    shown = {
        "phase": outcome.phase,
        "answer": outcome.answer,
        "output": outcome.output,
        "steps": outcome.steps,
        "last_error": outcome.last_error,
        "used": outcome.used.model_dump(),
        "builds": outcome.builds,
    }
    if outcome.output is None:  # a run without an output schema
        del shown["output"]
    if not outcome.builds:  # a worker without versioning
        del shown["builds"]
    print(json.dumps(shown, indent=2))
    return 0 if outcome.phase == "DONE" else 1


WAITING_PHASES = (
    Phase.AWAITING_APPROVAL,
    Phase.AWAITING_DECISION,
    Phase.AWAITING_MESSAGE,
    Phase.AWAITING_PERSON,
    Phase.PAUSED,
)


async def waiting_for(run: RunHandle, summary: RunSummary) -> str:
    """What a running run waits for, as lines after a colon (its current details: each call waiting
    for a person with the command that answers it), or "" when it is not waiting for anyone."""
    if summary.phase not in WAITING_PHASES:
        return ""
    try:
        details = await run.current_details()
    except RatchetError:  # no worker answers: the phase alone
        return ""
    lines = [line.replace("**", "") for line in details.splitlines()[1:] if line.strip()]
    lines = [line for line in lines if not line.startswith("Last checkpoint")]
    return ":\n" + "\n".join(f"  {line}" for line in lines) if lines else ""


async def cancel(args: argparse.Namespace) -> int:
    await (await connected()).get(args.workflow_id).cancel()
    print(
        f"cancel requested for {args.workflow_id}: the running step is cancelled and the run ends "
        "under its failure policy (`ratchet watch` follows it)"
    )
    return 0


async def transcript(args: argparse.Namespace) -> int:
    """A page of the conversation. The run's state holds the recent part; earlier messages (before
    a continue-as-new) are read from the transcript artifact in the artifact store."""
    page = await (await connected()).get(args.workflow_id).transcript(args.offset, args.limit)
    for index, message in enumerate(page.messages, start=page.offset):
        print(json.dumps({"index": index, **message.model_dump(exclude_none=True)}))
    print(f"# {len(page.messages)} of {page.total} messages", file=sys.stderr)
    return 0


async def decide(args: argparse.Namespace) -> int:
    run = (await connected()).get(args.workflow_id)
    try:
        print(await run.decide(args.call_id, args.choice, result=args.result, reason=args.reason))
    except Refused as exc:
        print(exc)
        return 1
    return 0
