"""`python -m devtools.chaos --sessions 20 --turns 10`: sessions under faults (issue 24).

Each session is asked its turns one after another through `ratchet.client` (`ask`, a message id
per turn), some sent while the turn before still runs (`wait=False`: the queue policy makes them
the next turn), while the worker is SIGKILLed at random moments and the dev server restarts once.
A call that fails on the way (the server away, a worker killed) is sent again with the same
message id. Each turn opens one ticket in the tracker. Then the audit, from the transcript and
the tracker:

    sessions=20 turns=200 answered=200 lost=0 duplicate_answers=0 duplicate_effects=0 out_of_order=0

answered: turns whose answer came back as scripted; lost: turns never answered; duplicate_answers:
questions the conversation holds more than once; duplicate_effects: tickets opened more than once;
out_of_order: turns answered under another number than the order they were asked in.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from devtools.chaos.runner import _restart
from devtools.chaos.scenarios import ticket
from devtools.chaos.stack import ROOT, Stack, connect, rows
from devtools.chaos.supervisor import Supervisor
from devtools.devserver import DevServer
from ratchet.client import RatchetClient, RatchetError, Refused, RunHandle
from ratchet.contracts import TurnAnswer, TurnStatus

ATTEMPT_S = 20.0
"""How long one call may wait before it is sent again (same message id)."""


@dataclass
class SessionsOptions:
    sessions: int = 20
    turns: int = 10
    seed: int = 1
    kill_every: tuple[float, float] = (4.0, 15.0)
    max_kills: int | None = None
    restart_server: bool = True
    restart_after_s: float = 20.0
    """When the dev server restarts, seconds after the first session starts."""
    deadline_s: float = 900.0
    base: Path | None = None
    model_chars_per_s: float = 0.0
    """How fast the scripted model writes (RATCHET_SCRIPTED_CHARS_PER_S; 0: at once): a floor under a
    turn's time, so a short run still has turns running when the first kill comes."""


@dataclass
class SessionFigures:
    sessions: int = 0
    turns: int = 0
    answered: int = 0
    lost: int = 0
    duplicate_answers: int = 0
    duplicate_effects: int = 0
    out_of_order: int = 0
    kills: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.answered == self.turns and not (
            self.lost or self.duplicate_answers or self.duplicate_effects or self.out_of_order
        )

    def line(self) -> str:
        return (
            f"sessions={self.sessions} turns={self.turns} answered={self.answered} lost={self.lost} "
            f"duplicate_answers={self.duplicate_answers} duplicate_effects={self.duplicate_effects} "
            f"out_of_order={self.out_of_order}"
        )


@dataclass
class SessionsRun:
    figures: SessionFigures
    base: Path


def session_input(wid: str, turns: int) -> dict:
    script: list[dict] = []
    for turn in range(1, turns + 1):
        script += [{"tool_calls": [ticket(f"{wid} t{turn}")]}, {"content": f"answer {wid} {turn}"}]
    return {
        "agent": "chaos_quick",
        "objective": question(wid, 1),
        "workspace": wid,
        "session": {},
        "budget": {"max_steps": 4 * turns},
        "model": {"provider": "scripted", "options": {"script": script}, "timeout_s": 2.0},
    }


def question(wid: str, turn: int) -> str:
    return f"{wid} question {turn}"


async def again(call, what: str, deadline: float):
    """`call()` until it answers: sent again (the same message id) while the server or the worker is away."""
    while True:
        try:
            return await asyncio.wait_for(call(), ATTEMPT_S)
        except Refused as refused:
            if "has not started" not in refused.reason:
                raise
        except (RatchetError, TimeoutError):
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: no answer before the deadline")
        await asyncio.sleep(0.5)


async def drive(
    runs: RatchetClient, wid: str, turns: int, rng: random.Random, deadline: float
) -> dict[int, TurnAnswer]:
    """Start the session, ask its turns (some without waiting), then collect every turn's answer."""

    async def start() -> RunHandle:
        try:
            return await runs.start(session_input(wid, turns), wid)
        except Refused:  # the first attempt reached the server before it went away
            return runs.get(wid)

    run = await again(start, f"start {wid}", deadline)
    answers: dict[int, TurnAnswer] = {}
    for turn in range(2, turns + 1):
        wait = rng.random() < 0.6
        mid = f"{wid}-m{turn}"
        got = await again(lambda: run.ask(question(wid, turn), message_id=mid, wait=wait), f"ask {mid}", deadline)
        if wait:
            answers[turn] = got
    for turn in range(2, turns + 1):
        if turn not in answers:
            mid = f"{wid}-m{turn}"
            answers[turn] = await again(lambda: run.answer(mid), f"answer {mid}", deadline)
    await again(run.close, f"close {wid}", deadline)
    return answers


async def audit(
    runs: RatchetClient,
    stack: Stack,
    wid: str,
    turns: int,
    answers: dict[int, TurnAnswer] | BaseException,
    figures: SessionFigures,
) -> None:
    figures.turns += turns
    if isinstance(answers, BaseException):
        figures.lost += turns
        figures.problems.append(f"  {wid}: its driver did not finish: {type(answers).__name__}: {answers}")
        return
    run = runs.get(wid)
    page = await again(lambda: run.transcript(0, 1000), f"transcript {wid}", time.monotonic() + 120)
    asked = Counter(m.content for m in page.messages if m.role == "user")
    figures.duplicate_answers += sum(1 for text, n in asked.items() if n > 1)
    first = next((m.content for m in page.messages if m.role == "assistant" and m.content), None)
    answered = {1: first == f"answer {wid} 1"} | {
        turn: a.status == TurnStatus.ANSWERED and a.answer == f"answer {wid} {turn}" for turn, a in answers.items()
    }
    figures.answered += sum(answered.values())
    figures.lost += sum(1 for ok in answered.values() if not ok)
    figures.out_of_order += sum(1 for turn, a in answers.items() if a.turn is not None and a.turn != turn)
    opened = Counter(title for _, title, _ in rows(stack.tracker(), "tickets") if title.startswith(f"{wid} "))
    figures.duplicate_effects += sum(n - 1 for n in opened.values() if n > 1)
    missing = [n for n in range(1, turns + 1) if opened[f"{wid} t{n}"] == 0]
    if missing or not all(answered.values()):
        figures.problems.append(f"  {wid}: tickets missing for turns {missing}; answered {answered}")


async def run_sessions(opts: SessionsOptions, log=print) -> SessionsRun:
    base = opts.base or ROOT / ".ratchet" / "chaos" / f"sessions-{time.strftime('%Y%m%d-%H%M%S')}"
    base.mkdir(parents=True, exist_ok=True)
    rng = random.Random(opts.seed)
    server = DevServer(db_file=base / "temporal.db", log_file=base / "server.log")
    await asyncio.to_thread(server.start)
    pace = {"RATCHET_SCRIPTED_CHARS_PER_S": str(opts.model_chars_per_s)} if opts.model_chars_per_s else {}
    stack = Stack(base, server.address, env=pace)
    supervisor = Supervisor(
        stack, base / "logs", opts.kill_every, rng=random.Random(opts.seed + 1), max_kills=opts.max_kills
    )
    figures = SessionFigures(sessions=opts.sessions)
    try:
        log(f"chaos: {opts.sessions} sessions of {opts.turns} turns in {base}, server {server.address}")
        await supervisor.ensure_worker()
        runs = RatchetClient(await connect(server.address), stack.settings())
        stop = asyncio.Event()
        killer = asyncio.create_task(supervisor.chaos(stop))
        restart = asyncio.create_task(_restart(server, opts.restart_after_s, log)) if opts.restart_server else None
        deadline = time.monotonic() + opts.deadline_s
        ids = [f"sess-{stack.task_queue[-6:]}-{i:02d}" for i in range(opts.sessions)]
        driven = await asyncio.gather(
            *(drive(runs, wid, opts.turns, random.Random(rng.random()), deadline) for wid in ids),
            return_exceptions=True,
        )
        stop.set()
        await killer
        if restart is not None:
            await restart
        await supervisor.ensure_worker()  # the transcript query replays on a worker
        for wid, answers in zip(ids, driven):
            await audit(runs, stack, wid, opts.turns, answers, figures)
    finally:
        await supervisor.shutdown()
        await asyncio.to_thread(server.stop)
    figures.kills = supervisor.kills
    return SessionsRun(figures, base)
