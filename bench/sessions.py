"""Sessions (issue 24): a turn's cost against the raw SDK, many idle sessions on one worker, and a
long session's history per turn.

- `session_turn_ms_p50/p99`: `ask` -> answer on one session (the scripted provider, one reply a
  turn), against the floor, a raw-SDK workflow whose update runs one activity
  (`session_turn_ratio`: p50 over the floor's p50; the two take turns in rounds of 10).
- `idle_sessions_rss_mib`: the worker's RSS with `idle` sessions waiting for a message (started,
  each answered its first turn); `idle_turn_p99_ratio`: the p99 of a turn on one of them over a
  fresh session's.
- `upgrade_handover_ms_p50/p99`: `ask` -> answer on a session whose worker deployment made another
  build current since its last turn: the turn includes its move (a continue-as-new onto the new
  build, the answer there; workflows/upgrades.py); `upgrade_turn_ratio`: that p50 over the same
  sessions' turn before the move.
- `session_history_bytes_ratio`: history bytes of the run that ends at the last turn against the
  one that ends at turn 20, the first to start from a handover (it continues as new every 10
  turns); `session_history_first_run_ratio` against the run of turns 1-10, which starts from the
  bare run input and so is smaller.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from bench.floor import FLOOR_SESSION
from bench.harness import Env, Variant, WorkerProcess
from bench.history import percentile
from bench.progress import Progress
from ratchet.client import RatchetError, RunHandle
from ratchet.contracts import AGENT_WORKFLOW, Phase, RunAttributes
from ratchet.deploys import deployments

VARIANT = Variant("sessions", "ratchet", AGENT_WORKFLOW, label="Ratchet sessions, scripted replies")
FLOOR = Variant("floor", "floor", FLOOR_SESSION, label="raw SDK: an update answered by one activity")
ROUND = 10
"""Turns in a row on one side before the other takes its turn (`alternating`)."""
PAUSE_S = 0.2
"""Between two measured turns, as between a person's messages. Back to back, a burst of about 30
turns later every task a turn dispatches takes about 50 ms to reach its worker, the raw SDK's as
much as Ratchet's (dev server 1.32, measured with the floor alone: 15 ms a turn, then 50; 100 with
eager activities off): the measure would be of that pacing, not of a turn."""


def session_run(turns: int) -> dict[str, Any]:
    script = [{"content": f"answer {i}"} for i in range(turns + 1)]
    return {
        "agent": "bench",
        "objective": "first question",
        "session": {},
        "budget": {"max_steps": 100_000},
        "model": {"provider": "scripted", "options": {"script": script}},
    }


async def timed(turn: Callable[[int], Awaitable[Any]], turns: int, pause_s: float = 0.0) -> list[float]:
    """Milliseconds of each of `turns` calls of `turn(i)`, `pause_s` apart."""
    times = []
    for i in range(turns):
        await asyncio.sleep(pause_s)
        began = time.perf_counter()
        await turn(i)
        times.append((time.perf_counter() - began) * 1000)
    return times


async def timed_asks(run: RunHandle, turns: int, pause_s: float = 0.0) -> list[float]:
    return await timed(lambda i: run.ask(f"question {i}"), turns, pause_s)


async def alternating(floor: Any, run: RunHandle, turns: int) -> tuple[list[float], list[float]]:
    """`turns` turns each on Ratchet's session and the floor's, `PAUSE_S` apart, in rounds of
    `ROUND` turns taking turns: the machine's drift over the measurement falls on both alike."""
    ratchet_ms: list[float] = []
    floor_ms: list[float] = []
    while len(ratchet_ms) < turns:
        count = min(ROUND, turns - len(ratchet_ms))
        floor_ms += await timed(lambda i: floor.execute_update("ask", i, result_type=str), count, PAUSE_S)
        ratchet_ms += await timed_asks(run, count, PAUSE_S)
    return ratchet_ms, floor_ms


async def until_idle(run: RunHandle) -> None:
    """Until the session waits for a message (a query that times out on a busy worker is asked again)."""
    while True:
        try:
            if (await run.state()).phase == Phase.AWAITING_MESSAGE:
                return
        except RatchetError:  # not started yet, or the worker too busy to answer in time
            pass
        await asyncio.sleep(0.2)


async def idle_count(env: Env, queue: str, sessions: int) -> None:
    """Until `sessions` sessions of the queue wait for a message, by visibility: one count request
    a poll, not a state query per session (a query of an evicted session replays it on the worker)."""
    query = f'TaskQueue="{queue}" AND {RunAttributes.PHASE}="AWAITING_MESSAGE" AND ExecutionStatus="Running"'
    while (await env.raw.count_workflows(query)).count < sessions:
        await asyncio.sleep(0.2)


async def run_bytes(run: RunHandle, run_id: str | None) -> tuple[int, str | None]:
    """Bytes of a run's history, and the run before it."""
    history = await run.history(run_id=run_id)
    started = history.events[0].workflow_execution_started_event_attributes
    return sum(e.ByteSize() for e in history.events), started.continued_execution_run_id or None


async def session_cost(env: Env, progress: Progress, turns: int, idle: int, long_turns: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    progress.begin(f"sessions: {turns} turns against the floor, alternating")
    async with env.worker(VARIANT) as worker:
        runs = env.runs(worker.queue)
        one = await runs.start(session_run(max(turns, long_turns)))
        await until_idle(one)
        async with env.worker(FLOOR) as floor:  # beside Ratchet's for this measurement only
            handle = await env.raw.start_workflow(
                FLOOR_SESSION, id=f"floor-session-{uuid.uuid4().hex[:8]}", task_queue=floor.queue
            )
            out["turn_ms"], out["floor_ms"] = await alternating(handle, one, turns)
            await handle.signal("close")
        progress.end(f"p50 {percentile(out['turn_ms'], 50):.1f} ms, floor {percentile(out['floor_ms'], 50):.1f} ms")

        progress.begin(f"sessions: one session to turn {long_turns}")
        await timed_asks(one, long_turns - turns - 1)
        await until_idle(one)
        state = await one.state()
        chain, run_id = [], None
        while True:  # newest first
            size, run_id = await run_bytes(one, run_id)
            chain.append(size)
            if run_id is None:
                break
        # newest first: chain[0] is the run it just continued into, chain[-1] the one of turns 1-10,
        # chain[-2] the first to start from a handover (turns 11-20)
        out["long"] = {
            "turns": state.session.turn_number,
            "runs": len(chain),
            "first": chain[-1],
            "second": chain[-2] if len(chain) > 2 else 0,
            "last": chain[1] if len(chain) > 2 else 0,
        }
        await one.close()
        progress.end(f"{len(chain)} runs")

        progress.begin(f"sessions: {idle} idle sessions on one worker")
        started: list[RunHandle] = []
        for _ in range(0, idle, 50):  # fifty at a time
            batch = await asyncio.gather(*(runs.start(session_run(4)) for _ in range(min(50, idle - len(started)))))
            started += batch
            await idle_count(env, worker.queue, len(started))
        out["idle"] = {"sessions": idle, "rss_mib": worker.stats()["rss_mib"]}
        sample = random.Random(7).sample(started, min(20, idle))
        idle_ms = [(await timed_asks(run, 1))[0] for run in sample]
        fresh = [await runs.start(session_run(4)) for _ in range(len(sample))]
        fresh_ms = []
        for run in fresh:
            await until_idle(run)
            fresh_ms += await timed_asks(run, 1)
        out["idle"].update(idle_ms=idle_ms, fresh_ms=fresh_ms)
        for at in range(0, len(started + fresh), 100):
            await asyncio.gather(*(run.close() for run in (started + fresh)[at : at + 100]))
        progress.end(f"RSS {out['idle']['rss_mib']:.0f} MiB")
    out["upgrade"] = await upgrade_cost(env, progress, max(2, min(turns, 20)))
    return out


async def upgrade_cost(env: Env, progress: Progress, count: int) -> dict[str, list[float]]:
    """`count` sessions on build a of a deployment of their own: a turn each, then build b made
    current, then a turn each again (its move included). Two worker processes on one task queue."""
    progress.begin(f"sessions: {count} sessions move to a new build at their next turn")
    deployment = f"bench-up-{uuid.uuid4().hex[:8]}"
    first = {"RATCHET_DEPLOYMENT": deployment, "RATCHET_BUILD_ID": "bench-a", "RATCHET_PROMOTE": "first"}
    second = {"RATCHET_DEPLOYMENT": deployment, "RATCHET_BUILD_ID": "bench-b", "RATCHET_PROMOTE": "never"}
    async with env.worker(dataclasses.replace(VARIANT, env=tuple(first.items()))) as a:
        runs = env.runs(a.queue)
        sessions = await asyncio.gather(*(runs.start(session_run(4)) for _ in range(count)))
        await idle_count(env, a.queue, count)
        before = [(await timed_asks(run, 1))[0] for run in sessions]
        async with WorkerProcess(VARIANT.worker, env.address, env.root, second, queue=a.queue):
            while a.queue not in await _served(env, deployment, "bench-b"):  # b polls the sessions' queue
                await asyncio.sleep(0.2)
            await deployments.set_current(env.ratchet, deployment, "bench-b")
            moved = [(await timed_asks(run, 1))[0] for run in sessions]
            builds = {tuple((await run.state()).release.builds) for run in sessions}
            assert builds == {("bench-a", "bench-b")}, f"not every session moved: {builds}"
            await asyncio.gather(*(run.close() for run in sessions))
    progress.end(f"p50 {percentile(moved, 50):.1f} ms, the turn before {percentile(before, 50):.1f} ms")
    return {"before_ms": before, "moved_ms": moved}


async def _served(env: Env, deployment: str, build: str) -> set[str]:
    found = await deployments.describe(env.ratchet, deployment)
    if found is None or found.version(build) is None:
        return set()
    return await deployments.task_queues(env.ratchet, deployment, build)


def session_figures(section: dict[str, Any]) -> dict[str, float]:
    if not section:
        return {}
    turn, floor = section["turn_ms"], section["floor_ms"]
    long, idle = section["long"], section["idle"]
    figures = {
        "session_turn_ms_p50": percentile(turn, 50),
        "session_turn_ms_p99": percentile(turn, 99),
        "session_turn_ratio": percentile(turn, 50) / percentile(floor, 50),
        "idle_sessions": idle["sessions"],
        "idle_sessions_rss_mib": idle["rss_mib"],
        "idle_turn_p99_ratio": percentile(idle["idle_ms"], 99) / percentile(idle["fresh_ms"], 99),
    }
    if section.get("upgrade"):
        moved, before = section["upgrade"]["moved_ms"], section["upgrade"]["before_ms"]
        figures["upgrade_handover_ms_p50"] = percentile(moved, 50)
        figures["upgrade_handover_ms_p99"] = percentile(moved, 99)
        figures["upgrade_turn_ratio"] = percentile(moved, 50) / percentile(before, 50)
    if long["second"] and long["last"]:
        figures["session_history_bytes_ratio"] = long["last"] / long["second"]
        figures["session_history_first_run_ratio"] = long["last"] / long["first"]
    return figures


def session_rows(section: dict[str, Any]) -> tuple[list[str], list[list[Any]]]:
    header = ["measure", "value"]
    figures = session_figures(section)
    return header, [[name, round(value, 2)] for name, value in figures.items()]
