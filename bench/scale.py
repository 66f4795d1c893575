"""Scale: many concurrent runs on one worker process, and memory with many runs cached.

Throughput is agent steps per second of wall time, from the first start request to the last
result. Step latency is the time between consecutive model calls of one run (server clock).
Every figure comes from a fresh worker whose first (cold) run is done before the clock starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from typing import Any

from bench.harness import VARIANTS, Env, Variant, check_result, machine_load, run_history, model_activity, start_run, timed_run
from bench.history import analyze, percentile
from bench.progress import Progress


async def _gather_limited(coros, limit: int = 25) -> list[Any]:
    gate = asyncio.Semaphore(limit)

    async def one(coro):
        async with gate:
            return await coro

    return await asyncio.gather(*(one(c) for c in coros))


async def concurrent_runs(env: Env, variant: Variant, agents: int, steps: int) -> dict[str, Any]:
    async with env.worker(variant) as worker:
        await timed_run(env, variant, 2, worker.queue)  # cold start outside the clock
        return await _batch(env, variant, worker, agents, steps)


async def _batch(env: Env, variant: Variant, worker, agents: int, steps: int) -> dict[str, Any]:
    """`agents` runs of `steps` steps at once on `worker` (warm), timed from the first start request
    to the last result; its CPU and the server's over that time."""
    before, server_before = worker.stats(), env.server_cpu_s()
    began = time.perf_counter()
    handles = await _gather_limited([start_run(env, variant, steps, worker.queue) for _ in range(agents)])
    for result in await asyncio.gather(*(h.result() for h in handles)):
        check_result(variant, steps, result)
    wall = time.perf_counter() - began
    after, server_after = worker.stats(), env.server_cpu_s()
    histories = await _gather_limited([run_history(h) for h in handles])
    stats = [analyze(h, model_activity(variant)) for h in histories]
    latencies = [x for s in stats for x in s.step_latencies_s]
    total = agents * steps
    return {
        "variant": variant.name, "agents": agents, "steps": steps, "wall_s": wall,
        "steps_per_s": total / wall, "p50_step_ms": percentile(latencies, 50) * 1000,
        "p99_step_ms": percentile(latencies, 99) * 1000, "peak_rss_mib": after["peak_rss_mib"],
        "cpu_ms_per_step": (after["cpu_s"] - before["cpu_s"]) / total * 1000,
        "server_cpu_ms_per_step": (server_after - server_before) / total * 1000,
        "wft_timeouts": sum(s.wft_timeouts for s in stats), "load": machine_load(),
    }


THROUGHPUT_VARIANTS = ("floor", "floor_local", "ratchet", "workspace")
SIDE_BY_SIDE_REPS = 3


def side_by_side_reps(reps: int) -> int:
    """Side-by-side repetitions of a size: one per SIDE_BY_SIDE_REPS of its repetitions in turn (at least one)."""
    return -(-reps // SIDE_BY_SIDE_REPS)


async def throughput_pair(env: Env, progress: Progress, sizes: Sequence[Sequence[int]]) -> list[dict[str, Any]]:
    """For each (agents, steps, reps) of `sizes`: the floor, the floor in Ratchet's step shape,
    Ratchet and Ratchet with the coder's read_file in turn (the order rotating), `reps` times each;
    then side by side (`side_by_side`). Each cell says its repetition."""
    cells = []
    for agents, steps, reps in sizes:
        for rep in range(reps):
            turn = rep % len(THROUGHPUT_VARIANTS)
            for name in THROUGHPUT_VARIANTS[turn:] + THROUGHPUT_VARIANTS[:turn]:
                progress.begin(f"throughput: {name}, {agents} concurrent runs of {steps} steps, rep {rep + 1}/{reps}")
                cells.append({**await concurrent_runs(env, VARIANTS[name], agents, steps), "rep": rep})
                progress.end(f"{cells[-1]['steps_per_s']:.1f} steps/s")
        for rep in range(side_by_side_reps(reps)):
            progress.begin(f"throughput side by side: every variant's {agents} runs of {steps} steps at once, rep {rep + 1}")
            cells += await side_by_side(env, agents, steps, rep)
            progress.end(", ".join(f"{c['variant']} {c['cpu_ms_per_step']:.2f}" for c in cells[-len(THROUGHPUT_VARIANTS):])
                         + " ms worker CPU/step")
    return cells


async def side_by_side(env: Env, agents: int, steps: int, rep: int) -> list[dict[str, Any]]:
    """Every throughput variant on its own worker, each with `agents` runs of `steps` steps, all at
    the same time: their worker CPU per step over the same seconds. This machine's speed drifts by
    up to a third over minutes with no load or steal to show for it, which cells in turn each catch
    at another moment; side by side, a drift moves every worker alike (two workers of the same code
    agree within 5%). Steps/s here is a share of the machine, not a throughput."""
    async with contextlib.AsyncExitStack() as stack:
        workers = []
        for name in THROUGHPUT_VARIANTS:
            variant = VARIANTS[name]
            worker = await stack.enter_async_context(env.worker(variant))
            await timed_run(env, variant, 2, worker.queue)  # cold start outside the clock
            workers.append((variant, worker))
        done = await asyncio.gather(*(_batch(env, variant, worker, agents, steps) for variant, worker in workers))
    # the server served them all at once: its CPU is no one variant's
    return [{**cell, "rep": rep, "together": True, "server_cpu_ms_per_step": ""} for cell in done]


async def sweep(env: Env, progress: Progress, levels: Sequence[int], steps: int, headline: int,
                headline_steps: int) -> list[dict[str, Any]]:
    """Raise concurrency until throughput stops growing (under 10% more than the level before)."""
    cells: list[dict[str, Any]] = []
    for agents in levels:
        n = headline_steps if agents == headline else steps
        progress.begin(f"scale: {agents} concurrent agents of {n} steps on one worker")
        cell = await concurrent_runs(env, VARIANTS["ratchet"], agents, n)
        cells.append(cell)
        progress.end(f"{cell['steps_per_s']:.1f} steps/s, p50 {cell['p50_step_ms']:.0f} ms, "
                     f"p99 {cell['p99_step_ms']:.0f} ms, peak RSS {cell['peak_rss_mib']:.0f} MiB, "
                     f"WFT timeouts {cell['wft_timeouts']}")
        grew = len(cells) < 2 or cell["steps_per_s"] > 1.1 * cells[-2]["steps_per_s"]
        if not grew and agents >= headline:
            break
    return cells


def knee(cells: list[dict[str, Any]]) -> int:
    """The lowest concurrency after which throughput grows by less than 10%."""
    ordered = sorted(cells, key=lambda c: c["agents"])
    for here, after in zip(ordered, ordered[1:]):
        if after["steps_per_s"] < 1.1 * here["steps_per_s"]:
            return here["agents"]
    return ordered[-1]["agents"] if ordered else 0


WAIT_SCRIPT = [{"tool_calls": [{"name": "wait", "arguments": {"seconds": 600}}]}, {"content": "done"}]


async def _in_timer(handle) -> bool:
    return any(e.HasField("timer_started_event_attributes") for e in (await run_history(handle)).events)


async def cached_runs(
    env: Env, progress: Progress, runs: int, variant_name: str = "ratchet", timeout_s: float = 900
) -> dict[str, Any]:
    """`runs` agents that each wait on a 10-minute timer, so they all stay in the worker's cache."""
    variant = VARIANTS[variant_name]
    progress.begin(f"memory: {runs} cached {variant_name} runs, each waiting on a 10-minute timer")
    async with env.worker(variant) as worker:
        await timed_run(env, variant, 2, worker.queue)
        idle = worker.stats()
        run_input = {"agent": "bench", "objective": "wait", "workspace": "bench",
                     "model": {"provider": "scripted", "options": {"script": WAIT_SCRIPT}}}
        handles = await _gather_limited([start_run(env, variant, 0, worker.queue, run_input) for _ in range(runs)])
        waiting, deadline = list(handles), time.monotonic() + timeout_s
        while waiting and time.monotonic() < deadline:
            ready = await _gather_limited([_in_timer(h) for h in waiting])
            waiting = [h for h, ok in zip(waiting, ready) if not ok]
            if waiting:
                await asyncio.sleep(2)
        await asyncio.sleep(2)
        loaded = worker.stats()
    await _gather_limited([h.terminate("bench done") for h in handles])
    cell = {
        "variant": variant_name, "runs": runs, "not_cached": len(waiting), "idle_rss_mib": idle["rss_mib"], "rss_mib": loaded["rss_mib"],
        "kib_per_run": (loaded["rss_mib"] - idle["rss_mib"]) * 1024 / runs, "load": machine_load(),
    }
    progress.end(f"RSS {cell['rss_mib']:.0f} MiB ({cell['kib_per_run']:.0f} KiB per cached run)")
    return cell
