"""`ratchet chat`: a session in a terminal, a turn per line, the answer shown as the model writes
it, approvals asked inline, slash commands for checkpoints, rollback and close (the verb's
description in ratchet/cli/table.py says it to the user). All of it over `ratchet.client`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import uuid
from pathlib import Path

from ratchet.cli.verbs import connected
from ratchet.cli.watch import describe
from ratchet.client import LiveText, RatchetClient, Refused, RunHandle
from ratchet.contracts import Phase
from ratchet.contracts.events import ApprovalRequested, PhaseChanged, RunEnded

PROMPT = "you> "
HELP = "/checkpoints, /rollback CHECKPOINT, /close, /quit"


async def _session(args: argparse.Namespace) -> int:
    runs = await connected()
    if args.workflow_id:
        run = runs.get(args.workflow_id)
        print(f"rejoined {run.workflow_id} ({HELP})", flush=True)
    else:
        first = await _line()
        if first is None:
            return 0
        run = await _start(runs, args, first)
        print(f"session {run.workflow_id} ({HELP})", flush=True)
        await _follow(run, 0)
    while True:
        line = await _line()
        if line is None or line == "/quit":
            print(f"left {run.workflow_id} open: `ratchet chat {run.workflow_id}` rejoins it", flush=True)
            return 0
        if not line.strip():
            continue
        if line.startswith("/"):
            if await _command(run, line):
                return 0
            continue
        offset = await run.stream_end()
        try:
            await run.ask(line, message_id=uuid.uuid4().hex, wait=False)
        except Refused as refused:
            print(f"refused: {refused.reason}", flush=True)
            continue
        await _follow(run, offset)


async def _start(runs: RatchetClient, args: argparse.Namespace, objective: str) -> RunHandle:
    fields = json.loads(Path(args.file).read_text()) if args.file else {}
    fields.update({"agent": args.agent or fields.get("agent"), "objective": objective})
    fields.setdefault("session", {})
    return await runs.start(fields, args.id)


async def _line() -> str | None:
    """The next line typed (None at the end of input)."""
    try:
        return await asyncio.to_thread(input, PROMPT)
    except EOFError:
        return None


async def _follow(run: RunHandle, offset: int) -> None:
    """A turn as it happens, until the session waits for the next message (or ends)."""
    text, mid_line = LiveText(), False
    async for event in run.stream(from_offset=offset):
        shown = text.feed(event)
        if shown:
            sys.stdout.write(shown)
            sys.stdout.flush()
            mid_line = not shown.endswith("\n")
            continue
        if isinstance(event, PhaseChanged) and event.phase == Phase.AWAITING_MESSAGE:
            break
        line = describe(event, run.workflow_id) if not isinstance(event, ApprovalRequested) else None
        if mid_line and (line or isinstance(event, ApprovalRequested)):
            print()
            mid_line = False
        if isinstance(event, ApprovalRequested):
            await _approval(run, event)
        elif line:
            print(line, flush=True)
        if isinstance(event, RunEnded):
            break
    if mid_line:
        print()
    state = await run.state()
    turn = state.session.turns.items[-1] if state.session.turns.items else None
    if turn is not None and not text.steps and turn.answer:  # the model's reply was not streamed
        print(turn.answer)
    if turn is not None:
        print(f"# turn {turn.number}: {turn.status}" + (f" ({turn.error})" if turn.error else ""), flush=True)


async def _approval(run: RunHandle, event: ApprovalRequested) -> None:
    answer = await asyncio.to_thread(input, f"approve {event.tool} {event.arguments[:80]} ({event.reason})? [y/N] ")
    try:
        if answer.strip().lower() in ("y", "yes"):
            print(await run.approve(event.call), flush=True)
        else:
            print(await run.reject(event.call, "rejected in the chat"), flush=True)
    except Refused as refused:
        print(f"refused: {refused.reason}", flush=True)


async def _command(run: RunHandle, line: str) -> bool:
    """A slash command; True: the chat ends."""
    name, _, rest = line.partition(" ")
    try:
        if name == "/checkpoints":
            for checkpoint in await run.checkpoints():
                print(f"  {checkpoint.id}: {checkpoint.summary}", flush=True)
        elif name == "/rollback" and rest.strip():
            outcome = await run.rollback(rest.strip())
            print(outcome.summary(), flush=True)
        elif name == "/close":
            print(await run.close(), flush=True)
            return True
        else:
            print(HELP, flush=True)
    except Refused as refused:
        print(f"refused: {refused.reason}", flush=True)
    return False


async def chat(args: argparse.Namespace) -> int:
    if not args.workflow_id and not (args.agent or args.file):
        print("ratchet chat: give a session's ID to rejoin, or --agent to start one")
        return 2
    return await _session(args)
