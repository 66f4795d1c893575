"""The deploy guard (issue #39, item 4): how long a broken build keeps its ramp after its first failure.

Two worker processes of one Worker Deployment on one task queue: `bench-a` current, `bench-b`
broken (`bench_release` fails its runs there: bench/plugin.py). A guard ramps bench-b to 50% with
`failure_rate<=0.2` (min_runs 3, so the first failed run breaks it: at best 1 of 3) and evaluates
every `interval_s`; runs are started `concurrency` at a time until it has rolled back. Each
repetition starts a new guard on the same workers.

- `guard_rollback_s`: from the close of the first failed run of bench-b (its CloseTime) to the
  guard's rollback decision (`GuardDecision.at`, the workflow task's time): both the server's clock.
  The worst repetition.
- `guard_rollback_over_interval_s`: that less the evaluation interval (the issue's target: under the
  interval plus 10 s).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from datetime import datetime
from typing import Any

from bench.harness import Env, Variant, WorkerProcess
from bench.history import percentile
from bench.progress import Progress
from ratchet.client import RatchetError
from ratchet.contracts import AGENT_WORKFLOW, GuardPhase, GuardRequest, Phase, RunAttributes
from ratchet.deploys import deployments
from ratchet.deploys.guarding import guard_status, start_guard

VARIANT = Variant("guard", "ratchet", AGENT_WORKFLOW, profile="bench_release", label="Ratchet, two builds and a guard")
GOOD, BROKEN = "bench-a", "bench-b"


def release_run() -> dict[str, Any]:
    script = [
        {"tool_calls": [{"name": "bench_release", "arguments": {"broken_on": [BROKEN]}}]},
        {"content": "released"},
    ]
    model = {"provider": "scripted", "options": {"script": script}}
    return {"agent": "bench_release", "objective": "release", "model": model}


async def guard_cost(env: Env, progress: Progress, interval_s: float, reps: int, concurrency: int) -> dict[str, Any]:
    deployment = f"bench-guard-{uuid.uuid4().hex[:8]}"
    first = {"RATCHET_DEPLOYMENT": deployment, "RATCHET_BUILD_ID": GOOD, "RATCHET_PROMOTE": "first"}
    second = {"RATCHET_DEPLOYMENT": deployment, "RATCHET_BUILD_ID": BROKEN, "RATCHET_PROMOTE": "never"}
    rollbacks: list[float] = []
    progress.begin(f"guard: a broken build's ramp rolled back, {reps} times, evaluated every {interval_s:g}s")
    async with WorkerProcess(VARIANT.worker, env.address, env.root, first) as a:
        async with WorkerProcess(VARIANT.worker, env.address, env.root, second, queue=a.queue):
            await _serving(env, deployment, a.queue)
            for _ in range(reps):
                rollbacks.append(await _one_rollback(env, deployment, a.queue, interval_s, concurrency))
    progress.end(f"worst {max(rollbacks):.2f}s after the first failure (interval {interval_s:g}s)")
    return {"interval_s": interval_s, "rollback_s": rollbacks}


async def _serving(env: Env, deployment: str, queue: str) -> None:
    """Until bench-a is current and bench-b polls the task queue."""
    while True:
        found = await deployments.describe(env.ratchet, deployment)
        if found is not None and found.current == GOOD and found.version(BROKEN) is not None:
            if queue in await deployments.task_queues(env.ratchet, deployment, BROKEN):
                return
        await asyncio.sleep(0.2)


async def _one_rollback(env: Env, deployment: str, queue: str, interval_s: float, concurrency: int) -> float:
    request = GuardRequest(
        deployment=deployment,
        build=BROKEN,
        criteria="failure_rate<=0.2",
        steps=[50, 100],
        min_runs=3,
        interval_s=interval_s,
        window_s=600,
    )
    await start_guard(env.ratchet, queue, request)
    started = datetime.now().astimezone()
    runs = env.runs(queue)

    async def keep_starting() -> None:
        while True:
            run = await runs.start(release_run())
            with contextlib.suppress(RatchetError):  # the broken build's runs fail
                await run.result()

    traffic = [asyncio.create_task(keep_starting()) for _ in range(concurrency)]
    try:
        while (status := await guard_status(env.ratchet, deployment)) is None or not status.ended:
            await asyncio.sleep(0.2)
    finally:
        for task in traffic:
            task.cancel()
        await asyncio.gather(*traffic, return_exceptions=True)
    assert status.phase == GuardPhase.ROLLED_BACK, f"the guard ended {status.phase}: {status.reason}"
    decided = datetime.fromisoformat(status.history[-1].at)
    query = (
        f'TaskQueue="{queue}" AND {RunAttributes.BUILD}="{BROKEN}" AND {RunAttributes.PHASE}="{Phase.FAILED}" '
        f'AND CloseTime >= "{started.isoformat()}"'
    )
    closed = [run.close_time async for run in env.raw.list_workflows(query) if run.close_time is not None]
    assert closed, "no failed run of the broken build listed"
    return (decided - min(closed)).total_seconds()


def guard_figures(section: dict[str, Any]) -> dict[str, float]:
    if not section:
        return {}
    worst = max(section["rollback_s"])
    return {
        "guard_rollback_s": worst,
        "guard_rollback_s_p50": percentile(section["rollback_s"], 50),
        "guard_rollback_over_interval_s": worst - section["interval_s"],
    }


def guard_rows(section: dict[str, Any]) -> tuple[list[str], list[list[Any]]]:
    figures = guard_figures(section)
    rows = [["evaluation interval (s)", section["interval_s"]], ["repetitions", len(section["rollback_s"])]]
    return ["measure", "value"], rows + [[name, round(value, 2)] for name, value in figures.items()]
