"""`python -m devtools.chaos --deploys --sessions 10 --runs 10`: deploys under faults (issue #39 item 6).

Two versions of Ratchet's code side by side on one dev server, each in its own worker processes of
one Worker Deployment (devtools/versions.py): v1 the commit V1 laid out from git, v2 the working
tree, which also loads tests/plugins/deploys_v2.py (a changed prompt: a new build whatever the
code). v1 is the first build, so current; then the current build goes v1 -> v2 -> v1
(`ratchet deploy promote`, then `ratchet deploy rollback`, over `RatchetClient.deploys`), while each version's worker is
SIGKILLed at random moments (and started again) and the dev server restarts once, after the first
deploy. Live through it all:

- sessions (`chaos_quick`, a ticket opened each turn), asked one turn on v1, two after the first
  deploy, two after the second: each moves to the new build at its next turn boundary, so ends
  having run on v1, v2, v1;
- one-shot runs (`approver`: a ticket, a `prod:` ticket that waits for a person, a ticket), half
  started on v1 before the first deploy, half on v2 before the second; each is approved only
  after the deploy that follows its start, so it is in flight when its build stops being current.

Then the audit, from the runs and the tracker:

    deploys=2 lost=0 duplicate_effects=0 nondeterminism=0 upgraded=20 pinned_finished=10

lost: session turns not answered as scripted, one-shot runs not DONE, tickets never opened;
duplicate_effects: tickets opened more than once; nondeterminism: workflow tasks failed as
non-deterministic, in any execution of any run; upgraded: the sessions' moves onto another build
(two each); pinned_finished: one-shot runs DONE on the one build they started on. Exit 1 if any of
the first three is not 0, a session did not move at both deploys, or a run finished elsewhere.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TypeVar

from temporalio.api.enums.v1 import EventType, WorkflowTaskFailedCause
from temporalio.client import Client
from temporalio.service import RPCError

from devtools.chaos.runner import _restart
from devtools.chaos.scenarios import ticket
from devtools.chaos.sessions import again, question, session_input
from devtools.chaos.stack import ROOT, Stack, connect, rows
from devtools.chaos.supervisor import Supervisor
from devtools.devserver import DevServer
from devtools.versions import V1, V2_PLUGIN, WORKING_TREE, checkout
from ratchet.client import RatchetClient, RatchetError, Refused, RunHandle
from ratchet.contracts import AgentState, Phase, TurnAnswer, TurnStatus
from ratchet.deploys import deployments

T = TypeVar("T")
PLUGINS = "tests.plugins.chaos_tools,tests.plugins.probe"
"""Both versions': chaos_quick (sessions) and approver (one-shot runs); v2 adds V2_PLUGIN."""
TURNS = (1, 2, 2)
"""Turns each session is asked on v1, after v1 -> v2, after v2 -> v1."""


@dataclass
class DeploysOptions:
    sessions: int = 10
    runs: int = 10
    """One-shot runs: half started on v1, half on v2."""
    seed: int = 1
    kill_every: tuple[float, float] = (4.0, 15.0)
    max_kills: int | None = None
    """Per version's worker."""
    restart_server: bool = True
    restart_after_s: float = 2.0
    """When the dev server restarts, seconds after the first deploy."""
    deadline_s: float = 900.0
    base: Path | None = None
    v1: str = V1


@dataclass
class DeployFigures:
    deploys: int = 0
    sessions: int = 0
    runs: int = 0
    lost: int = 0
    duplicate_effects: int = 0
    nondeterminism: int = 0
    upgraded: int = 0
    pinned_finished: int = 0
    kills: int = 0
    builds: tuple[str, str] = ("", "")
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        moved_twice = self.upgraded == self.sessions * (len(TURNS) - 1)
        return not (self.lost or self.duplicate_effects or self.nondeterminism) and (
            moved_twice and self.pinned_finished == self.runs
        )

    def line(self) -> str:
        return (
            f"deploys={self.deploys} lost={self.lost} duplicate_effects={self.duplicate_effects} "
            f"nondeterminism={self.nondeterminism} upgraded={self.upgraded} pinned_finished={self.pinned_finished}"
        )


@dataclass
class DeploysRun:
    figures: DeployFigures
    base: Path


@dataclass
class OneShot:
    workflow_id: str
    build: str
    """The build current when it started: the one it must finish on."""


def one_shot_input(wid: str) -> dict:
    script = [{"tool_calls": [ticket(title)]} for title in run_tickets(wid)] + [{"content": f"done {wid}"}]
    return {
        "agent": "approver",
        "objective": f"chaos deploys run {wid}",
        "workspace": wid,
        "model": {"provider": "scripted", "options": {"script": script}, "timeout_s": 2.0},
    }


def run_tickets(wid: str) -> list[str]:
    return [f"{wid} s1", f"prod: {wid}", f"{wid} s3"]  # the approver profile asks a person for `prod` tickets


async def run_deploys(opts: DeploysOptions, log: Callable[[str], None] = print) -> DeploysRun:
    base = opts.base or ROOT / ".ratchet" / "chaos" / f"deploys-{time.strftime('%Y%m%d-%H%M%S')}"
    base.mkdir(parents=True, exist_ok=True)
    v1_code = await asyncio.to_thread(checkout, opts.v1, base / "v1")
    server = DevServer(db_file=base / "temporal.db", log_file=base / "server.log")
    await asyncio.to_thread(server.start)
    v1 = Stack(base, server.address, code=v1_code)
    deployment = f"chaos-{v1.task_queue[-6:]}"
    v1.overrides.update(deployment=deployment, build_id=None, promote="first", plugins=PLUGINS)
    v2 = replace(
        v1, code=WORKING_TREE, overrides={**v1.overrides, "promote": "never", "plugins": f"{PLUGINS},{V2_PLUGIN}"}
    )
    supervisors = [
        Supervisor(
            stack, base / "logs" / name, opts.kill_every, rng=random.Random(opts.seed + i), max_kills=opts.max_kills
        )
        for i, (name, stack) in enumerate((("v1", v1), ("v2", v2)), start=1)
    ]
    figures = DeployFigures(sessions=opts.sessions, runs=opts.runs)
    try:
        log(f"chaos deploys: {opts.sessions} sessions, {opts.runs} one-shot runs in {base}, server {server.address}")
        client = await connect(server.address)
        await supervisors[0].ensure_worker()
        b1 = await _until(lambda: _current(client, deployment), "v1 current")
        await supervisors[1].ensure_worker()
        b2 = await _until(lambda: _other(client, deployment, b1), "v2 registered")
        figures.builds = (b1, b2)
        log(f"chaos deploys: v1 {b1} ({opts.v1[:7]}), v2 {b2} (the working tree)")
        runs = RatchetClient(client, v2.settings())
        deadline = time.monotonic() + opts.deadline_s
        stop = asyncio.Event()
        killers = [asyncio.create_task(s.chaos(stop)) for s in supervisors]
        restart: asyncio.Task | None = None
        ids = [f"dsess-{v1.task_queue[-6:]}-{i:02d}" for i in range(opts.sessions)]
        turns = sum(TURNS)
        answers: dict[str, dict[int, TurnAnswer]] = {wid: {} for wid in ids}
        sessions = await asyncio.gather(*(_start(runs, wid, session_input(wid, turns), deadline) for wid in ids))
        first = [OneShot(f"drun-{v1.task_queue[-6:]}-a{i:02d}", b1) for i in range(opts.runs // 2)]
        second = [OneShot(f"drun-{v1.task_queue[-6:]}-b{i:02d}", b2) for i in range(opts.runs - len(first))]
        await asyncio.gather(*(_waiting(runs, r, deadline) for r in first))

        await _deploy(client, deployment, b2, lambda: runs.deploys.promote(b2), log)
        figures.deploys += 1
        if opts.restart_server:
            restart = asyncio.create_task(_restart(server, opts.restart_after_s, log))
        await asyncio.gather(
            *(_approve(runs.get(r.workflow_id), deadline) for r in first),
            *(_waiting(runs, r, deadline) for r in second),
            *(_ask(s, answers[s.workflow_id], range(2, 2 + TURNS[1]), deadline) for s in sessions),
        )
        await _deploy(client, deployment, b1, runs.deploys.rollback, log)
        figures.deploys += 1
        await asyncio.gather(
            *(_approve(runs.get(r.workflow_id), deadline) for r in second),
            *(_ask(s, answers[s.workflow_id], range(2 + TURNS[1], turns + 1), deadline, close=True) for s in sessions),
        )
        for r in first + second:
            await again(runs.get(r.workflow_id).result, f"result {r.workflow_id}", deadline)
        stop.set()
        await asyncio.gather(*killers)
        if restart is not None:
            await restart
        for supervisor in supervisors:  # a closed run's queries replay on a worker of its build
            await supervisor.ensure_worker()
        await _audit(client, runs, v1, ids, answers, first + second, figures, deadline)
    finally:
        for supervisor in supervisors:
            await supervisor.shutdown()
        await asyncio.to_thread(server.stop)
    figures.kills = sum(s.kills for s in supervisors)
    return DeploysRun(figures, base)


async def _until(probe: Callable[[], Awaitable[T | None]], what: str, timeout_s: float = 120) -> T:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            found = await probe()
        except (RPCError, RatchetError):  # the server away
            found = None
        if found is not None:
            return found
        if time.monotonic() > deadline:
            raise TimeoutError(f"not seen in {timeout_s:g}s: {what}")
        await asyncio.sleep(0.3)  # the server limits requests per deployment


async def _current(client: Client, deployment: str) -> str | None:
    found = await deployments.describe(client, deployment)
    return found.current if found is not None else None


async def _other(client: Client, deployment: str, build: str) -> str | None:
    found = await deployments.describe(client, deployment)
    return next((b for b in found.build_ids if b != build), None) if found is not None else None


async def _deploy(
    client: Client, deployment: str, build: str, verb: Callable[[], Awaitable[object]], log: Callable[[str], None]
) -> None:
    """`verb()` (`ratchet deploy promote` or `rollback`, over `RatchetClient.deploys`) until `build`
    is current, again while the server is away or a worker of the build is down (not sent again
    once `build` is current: a second rollback would go back further)."""

    async def deployed() -> bool | None:
        if await _current(client, deployment) == build:
            return True
        try:
            await verb()
        except RatchetError:
            return None
        return True

    began = time.monotonic()
    await _until(deployed, f"{build} current")
    log(f"chaos deploys: {build} current in {time.monotonic() - began:.1f}s")


async def _start(runs: RatchetClient, wid: str, run: dict, deadline: float) -> RunHandle:
    async def start() -> RunHandle:
        try:
            return await runs.start(run, wid)
        except Refused:  # the first attempt reached the server before it went away
            return runs.get(wid)

    return await again(start, f"start {wid}", deadline)


async def _state(run: RunHandle, deadline: float) -> AgentState:
    return await again(run.state, f"state {run.workflow_id}", deadline)


async def _waiting(runs: RatchetClient, one_shot: OneShot, deadline: float) -> None:
    """Start the run; until it waits for its approval (in flight on its build)."""
    run = await _start(runs, one_shot.workflow_id, one_shot_input(one_shot.workflow_id), deadline)
    while (await _state(run, deadline)).phase != Phase.AWAITING_APPROVAL:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{one_shot.workflow_id}: never waited for its approval")
        await asyncio.sleep(0.2)


async def _approve(run: RunHandle, deadline: float) -> None:
    while pending := (await _state(run, deadline)).calls.pending_approvals:
        try:
            await again(lambda: run.approve(pending[0].call_id), f"approve {run.workflow_id}", deadline)
        except Refused:  # an approval sent again after the first went through
            pass


async def _ask(
    run: RunHandle, answers: dict[int, TurnAnswer], turns: range, deadline: float, close: bool = False
) -> None:
    """Ask `turns` one after another; an `ask` that returns before its turn ended (the client gave up
    following the session's move) is kept as `answers[-turn]` (the audit counts it lost), then
    followed here."""
    wid = run.workflow_id
    for turn in turns:
        mid = f"{wid}-m{turn}"
        got = await again(lambda: run.ask(question(wid, turn), message_id=mid), f"ask {mid}", deadline)
        if got.moved or got.status is None:
            answers[-turn] = got  # the audit counts it
        while got.moved or got.status is None:
            await asyncio.sleep(0.5)
            got = await again(lambda: run.answer(mid), f"answer {mid}", deadline)
        answers[turn] = got
    if close:
        await again(run.close, f"close {wid}", deadline)


async def _audit(
    client: Client,
    runs: RatchetClient,
    stack: Stack,
    ids: list[str],
    answers: dict[str, dict[int, TurnAnswer]],
    one_shots: list[OneShot],
    figures: DeployFigures,
    deadline: float,
) -> None:
    b1, b2 = figures.builds
    opened = Counter(title for _, title, _ in rows(stack.tracker(), "tickets"))
    figures.duplicate_effects = sum(n - 1 for n in opened.values() if n > 1)
    expected: list[str] = []
    for wid in ids:
        state = await _state(runs.get(wid), deadline)
        told = {t.number: t.answer for t in state.session.turns.items if t.status == TurnStatus.ANSWERED}
        told |= {n: a.answer for n, a in answers[wid].items() if a.status == TurnStatus.ANSWERED}
        wrong = [n for n in range(1, sum(TURNS) + 1) if told.get(n) != f"answer {wid} {n}"]
        unended = sorted(-n for n in answers[wid] if n < 0)
        figures.lost += len(wrong) + len(unended)
        if unended:
            figures.problems.append(f"  {wid}: ask returned before the turn ended (moved) for turns {unended}")
        figures.upgraded += state.release.moves
        if wrong or state.release.builds != [b1, b2, b1]:
            figures.problems.append(f"  {wid}: turns not answered {wrong}; builds {state.release.builds}")
        expected += [f"{wid} t{n}" for n in range(1, sum(TURNS) + 1)]
    for one_shot in one_shots:
        result = await again(runs.get(one_shot.workflow_id).result, f"result {one_shot.workflow_id}", deadline)
        if result.phase != Phase.DONE:
            figures.lost += 1
        elif result.builds == [one_shot.build]:
            figures.pinned_finished += 1
        if result.phase != Phase.DONE or result.builds != [one_shot.build]:
            figures.problems.append(
                f"  {one_shot.workflow_id}: {result.phase} on {result.builds}, started on {one_shot.build}"
            )
        expected += run_tickets(one_shot.workflow_id)
    missing = [title for title in expected if not opened[title]]
    figures.lost += len(missing)
    if missing:
        figures.problems.append(f"  tickets never opened: {missing}")
    for wid in ids + [r.workflow_id for r in one_shots]:
        failures = await _nondeterminism(client, wid)
        figures.nondeterminism += len(failures)
        figures.problems += [f"  {wid}: {message}" for message in failures[:2]]


async def _nondeterminism(client: Client, workflow_id: str) -> list[str]:
    """The messages of workflow tasks failed as non-deterministic, in every execution of the run."""
    found = []
    async for execution in client.list_workflows(f"WorkflowId = '{workflow_id}'"):
        history = await client.get_workflow_handle(workflow_id, run_id=execution.run_id).fetch_history()
        for event in history.events:
            if event.event_type != EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
                continue
            failed = event.workflow_task_failed_event_attributes
            cause = failed.cause == WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_NON_DETERMINISTIC_ERROR
            if cause or "nondetermin" in failed.failure.message.lower():
                found.append(failed.failure.message)
    return found
