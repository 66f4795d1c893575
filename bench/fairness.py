"""Fairness across tenants (issue #42, item 4): tenant B's latency while tenant A's burst is queued.

One worker with few slots and no workflow cache (every workflow task goes through the task queue,
where fairness applies; a sticky queue has none) serves a task queue of a dev server started with
fairness on (devtools/devserver.py `DYNAMIC_CONFIG`). Tenant B starts `b_runs` runs on the empty
queue, then tenant A starts `a_runs`, then B starts `b_runs` again: each B run's latency is from its
start request to its result, and the figure is the mean of the second set over the mean of the
first. Each run takes two model calls and a tool call (the scripted model, `bench_echo`).

- `fairness_b_latency_ratio`: with tenants (`AgentRun.tenant`, the fairness key; weights 1).
  Target at most 1.5. It depends on how long a model call is against the per-task overhead (a
  workflow task, a dispatch: they grow under load on a busy machine): the model calls here take
  about 2.7 s each (`CHARS_PER_S`), 16 at a time.
- `fairness_b_latency_ratio_without_keys`: the same runs naming no tenant: one FIFO backlog, B waits
  behind A's burst.

`measure` is what tests/ops/test_tenants_fairness.py asserts on, with its own worker.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from bench.harness import Env, Variant, WorkerProcess
from bench.progress import Progress
from ratchet.client import RatchetClient, RunClosed, RunHandle
from ratchet.contracts import Phase

SLOTS = 16
CHARS_PER_S = 5


def worker_env(chars_per_s: float = CHARS_PER_S) -> dict[str, str]:
    """A worker the burst backs up behind: `SLOTS` activities at once, each model call as long as a
    model writing its reply at `chars_per_s` (5: about 2.7 s; the worker waits, as on a provider)."""
    return {"RATCHET_MAX_CONCURRENT_ACTIVITIES": str(SLOTS), "BENCH_SCRIPTED_CHARS_PER_S": str(chars_per_s)}


VARIANT = Variant("fairness", "ratchet", "AgentWorkflow", profile="bench", label="Ratchet, two tenants")
START_CONCURRENCY = 20
"""A's starts in flight at once."""


def run_input(tenant: str | None, n: int) -> dict[str, Any]:
    script = [{"tool_calls": [{"name": "bench_echo", "arguments": {"text": str(n)}}]}, {"content": "done, all fine"}]
    run: dict[str, Any] = {
        "agent": "bench",
        "objective": f"fairness {n}",
        "model": {"provider": "scripted", "stream": False, "options": {"script": script}},
    }
    if tenant is not None:
        run["tenant"] = tenant
    return run


async def _finished(run: RunHandle, began: float) -> float:
    result = await run.result()
    if result.phase != Phase.DONE:
        raise RuntimeError(f"{run.workflow_id} ended {result.phase}: {result.last_error}")
    return time.perf_counter() - began


async def _timed(runs: RatchetClient, tenant: str | None, count: int) -> list[float]:
    """Seconds from each run's start request to its result, `count` runs started at once."""

    async def one(n: int) -> float:
        began = time.perf_counter()
        handle = await runs.start(run_input(tenant, n), f"fair-{tenant or 'none'}-{uuid.uuid4().hex[:10]}")
        return await _finished(handle, began)

    return list(await asyncio.gather(*(one(n) for n in range(count))))


async def _burst(runs: RatchetClient, tenant: str | None, count: int) -> list[RunHandle]:
    limit = asyncio.Semaphore(START_CONCURRENCY)

    async def one(n: int) -> RunHandle:
        async with limit:
            return await runs.start(run_input(tenant, n), f"fair-burst-{uuid.uuid4().hex[:10]}")

    return list(await asyncio.gather(*(one(n) for n in range(count))))


async def _terminate(handles: list[RunHandle]) -> None:
    limit = asyncio.Semaphore(START_CONCURRENCY)

    async def one(handle: RunHandle) -> None:
        async with limit:
            try:
                await handle.terminate("fairness measurement over")
            except RunClosed:
                pass

    await asyncio.gather(*(one(h) for h in handles))


async def measure(runs: RatchetClient, a_runs: int, b_runs: int, keys: bool) -> dict[str, Any]:
    """B's mean latency on the empty queue and under A's burst (a worker serves `runs`' queue);
    A's runs still open after are terminated."""
    a, b = ("tenant-a", "tenant-b") if keys else (None, None)
    await _timed(runs, b, 1)  # the worker warmed up: its first run is not timed
    empty = await _timed(runs, b, b_runs)
    burst = await _burst(runs, a, a_runs)
    try:
        loaded = await _timed(runs, b, b_runs)
    finally:
        await _terminate(burst)
    empty_s, loaded_s = sum(empty) / len(empty), sum(loaded) / len(loaded)
    return {"empty_s": empty, "burst_s": loaded, "ratio": loaded_s / empty_s, "a_runs": a_runs, "b_runs": b_runs}


async def fairness_cost(env: Env, progress: Progress, a_runs: int, b_runs: int, chars_per_s: float) -> dict[str, Any]:
    """Both measurements, each on a worker of its own."""
    results: dict[str, Any] = {"chars_per_s": chars_per_s, "slots": SLOTS}
    for keys in (True, False):
        progress.begin(f"fairness: {b_runs} runs of B behind {a_runs} of A, {'with' if keys else 'without'} tenants")
        async with WorkerProcess(VARIANT.worker, env.address, env.root, worker_env(chars_per_s)) as worker:
            found = await measure(env.runs(worker.queue), a_runs, b_runs, keys)
        results["with_keys" if keys else "without_keys"] = found
        progress.end(f"{found['ratio']:.2f}x")
    return results


def fairness_figures(section: dict[str, Any]) -> dict[str, float]:
    if not section:
        return {}
    return {
        "fairness_b_latency_ratio": section["with_keys"]["ratio"],
        "fairness_b_latency_ratio_without_keys": section["without_keys"]["ratio"],
    }


def fairness_rows(section: dict[str, Any]) -> tuple[list[str], list[list[Any]]]:
    rows = []
    for name in ("with_keys", "without_keys"):
        found = section[name]
        empty, burst = (sum(found[k]) / len(found[k]) for k in ("empty_s", "burst_s"))
        rows.append(
            [
                name.replace("_", " "),
                found["a_runs"],
                found["b_runs"],
                round(empty, 2),
                round(burst, 2),
                round(found["ratio"], 2),
            ]
        )
    return ["tenants", "A's runs", "B's runs", "B empty (s)", "B under A's burst (s)", "ratio"], rows
