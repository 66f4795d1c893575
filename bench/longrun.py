"""Long runs and replay speed.

- Replay: record one uncut run of many steps (profile `bench_replay`, the bench server's
  suggested-continue-as-new limits raised) and a floor run of as many steps, then replay both
  (bench/replay_speed.py).
- Long run: thousands of steps with continue-as-new (profile `bench_long`, every ~400 events).
  The worker's RSS is sampled while it runs; afterwards every run of the chain is fetched, and
  first-quarter vs last-quarter figures show whether memory and per-run history stay flat.
"""

from __future__ import annotations

import asyncio
import time
from statistics import median
from typing import Any

from temporalio.client import WorkflowHistory

from bench.harness import VARIANTS, Env, machine_load, script_file, start_run
from bench.replay_speed import replay_speeds
from bench.history import analyze
from bench.progress import Progress
from ratchet.client import RunHandle
from ratchet.contracts import Phase

RATCHET = VARIANTS["ratchet"]


def long_input(env: Env, profile: str, steps: int) -> dict[str, Any]:
    return {"agent": profile, "objective": f"long run of {steps} steps", "workspace": "bench",
            "model": {"provider": "scripted", "options": {"script_file": script_file(env.root, steps)}}, "budget": {"max_steps": steps + 1}}


async def record(env: Env, worker_queue: str, profile: str, steps: int) -> RunHandle:
    return await env.runs(worker_queue).start(long_input(env, profile, steps), f"bench-{profile}-{steps}-{time.monotonic_ns()}")


async def _sample_rss(worker, samples: list[tuple[float, float]], stop: asyncio.Event) -> None:
    began = time.monotonic()
    while not stop.is_set():
        samples.append((time.monotonic() - began, worker.stats()["rss_mib"]))
        try:
            await asyncio.wait_for(stop.wait(), 2.0)
        except asyncio.TimeoutError:
            pass


async def chain_histories(env: Env, workflow_id: str) -> list[WorkflowHistory]:
    """Every run of a continue-as-new chain, oldest first."""
    runs = [e async for e in env.ratchet.list_workflows(f'WorkflowId="{workflow_id}"')]
    runs.sort(key=lambda e: e.start_time)
    return [await env.ratchet.get_workflow_handle(workflow_id, run_id=e.run_id).fetch_history() for e in runs]


def quarters(values: list[float]) -> tuple[float, float]:
    q = max(1, len(values) // 4)
    return median(values[:q]), median(values[-q:])


async def long_and_replay(
    env: Env, progress: Progress, long_steps: int, replay_steps: int, budget_s: float
) -> dict[str, Any]:
    """The long run and the replay recording run at once, each on its own worker process. A long
    run still going after `budget_s` is terminated and measured on the steps it did."""
    progress.begin(f"long run: {long_steps} steps with continue-as-new; recording a {replay_steps}-step history")
    long_worker, replay_worker = await env.worker(RATCHET).start(), await env.worker(RATCHET).start()
    floor_worker = await env.worker(VARIANTS["floor"]).start()
    samples: list[tuple[float, float]] = []
    stop = asyncio.Event()
    try:
        sampler = asyncio.create_task(_sample_rss(long_worker, samples, stop))
        began = time.perf_counter()
        long_handle = await record(env, long_worker.queue, "bench_long", long_steps)
        replay_handle = await record(env, replay_worker.queue, "bench_replay", replay_steps)
        floor_handle = await start_run(env, VARIANTS["floor"], replay_steps, floor_worker.queue)
        shape_handle = await start_run(env, VARIANTS["floor_local"], replay_steps, floor_worker.queue)
        replay_result = await replay_handle.result()
        await floor_handle.result()
        await shape_handle.result()
        try:
            left = max(1.0, budget_s - (time.perf_counter() - began))
            long_result = await asyncio.wait_for(long_handle.result(), left)
        except asyncio.TimeoutError:
            await long_handle.terminate("bench: the long run's time budget is spent")
            long_result = None
        wall = time.perf_counter() - began
        stop.set()
        await sampler
        peak = long_worker.stats()["peak_rss_mib"]
    finally:
        for worker in (long_worker, replay_worker, floor_worker):
            await worker.terminate()
    for result, steps in ((replay_result, replay_steps), (long_result, long_steps)):
        if result is not None and (result.phase, result.steps) != (Phase.DONE, steps + 1):
            raise RuntimeError(f"long run ended wrongly: {result!r}")
    progress.end(f"{wall:.0f} s" + ("" if long_result else " (time budget spent: long run terminated)"))

    progress.begin("long run: fetching every run of the chain")
    chain = [analyze(h, "model.call") for h in await chain_histories(env, long_handle.workflow_id)]
    full = chain[:-1] if len(chain) > 2 else chain  # the last run is a partial one
    per_run_bytes = [s.bytes for s in full]
    per_run_input = [s.input_logical_bytes for s in full]
    per_step_ms = [median(s.step_latencies_s) * 1000 for s in full if s.step_latencies_s]
    rss = [mib for _, mib in samples]
    (bytes_first, bytes_last), (input_first, input_last) = quarters(per_run_bytes), quarters(per_run_input)
    (rss_first, rss_last), (ms_first, ms_last) = quarters(rss), quarters(per_step_ms or [0.0])
    progress.end(f"{len(chain)} runs")

    progress.begin(f"replay: {replay_steps}-step history")
    replay = await replay_speeds(
        env, await replay_handle.history(), await floor_handle.fetch_history(), await shape_handle.fetch_history()
    )
    progress.end(", ".join(f"{k} {v['events']} events {v['events_per_s']:.0f}/s" for k, v in replay.items()))
    return {
        "long": {
            "steps": long_steps, "steps_done": sum(s.model_calls for s in chain), "completed": long_result is not None,
            "wall_s": wall, "runs": len(chain), "peak_rss_mib": peak,
            "rss_first_mib": rss_first, "rss_last_mib": rss_last, "rss_ratio": rss_last / rss_first,
            "run_bytes_first": bytes_first, "run_bytes_last": bytes_last, "history_ratio": bytes_last / bytes_first,
            "run_input_first": input_first, "run_input_last": input_last, "input_ratio": input_last / max(input_first, 1),
            "step_ms_first": ms_first, "step_ms_last": ms_last, "step_ms_ratio": ms_last / ms_first if ms_first else 0.0,
            "rss_samples": samples, "per_run_bytes": [s.bytes for s in chain],
            "per_run_input": [s.input_logical_bytes for s in chain], "per_run_step_ms": per_step_ms,
            "wft_timeouts": sum(s.wft_timeouts for s in chain), "load": machine_load(),
        },
        "replay": {"steps": replay_steps, **replay},
    }
