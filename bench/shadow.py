"""Shadow runs under measure (issue 40), on one worker of the `bench` profile whose steps call the
read-only `bench_echo` (a tool a shadow runs for real, as it does the coder's `read_file`).

`shadow_step_ratio`: a shadow's ms/step over its original's. Each repetition runs a normal run of
N steps (start request -> result), then a shadow of it with `--model recorded` through
`ratchet.client`'s shadows API (`shadows.start` -> the shadow's result: the client's read of the
original's state and its transcript check are in the shadow's time). `shadow_cpu_ratio`: the same
for the worker's CPU (from /proc around each run). Medians over the repetitions.

`shadow_report_s_{runs}`: `runs` recorded runs of 2 steps (started at once, outside the clock), then
the time from `shadows.start` of all of them (`--model recorded`, the default concurrency) to their
report (`shadows.report`), every shadow checked to reproduce its original.
"""

from __future__ import annotations

import asyncio
import time
from statistics import median
from typing import Any

from bench.harness import VARIANTS, Env, WorkerProcess, check_result, start_run
from bench.progress import Progress
from ratchet.client import RatchetClient
from ratchet.client.shadows import RECORDED, Candidate

VARIANT = VARIANTS["ratchet"]
REPORT_STEPS = 2


async def shadow_cost(env: Env, progress: Progress, steps: int, reps: int, runs: int) -> dict[str, Any]:
    async with env.worker(VARIANT) as worker:
        client = env.runs(worker.queue)
        progress.begin(f"shadow: {reps} runs of {steps} steps and a recorded shadow of each")
        await _pair(env, client, worker, steps)  # warm: the worker's first run and first shadow, outside the clock
        cells = [await _pair(env, client, worker, steps) for _ in range(reps)]
        progress.end(
            f"shadow/normal ms/step {median(c['shadow_ms'] for c in cells) / median(c['normal_ms'] for c in cells):.2f}"
        )
        progress.begin(f"shadow: {runs} recorded runs -> their report")
        report_s = await _report_time(env, client, worker, runs)
        progress.end(f"{report_s:.1f} s")
    return {"steps": steps, "cells": cells, "runs": runs, "report_s": report_s}


async def _pair(env: Env, client: RatchetClient, worker: WorkerProcess, steps: int) -> dict[str, float]:
    """A normal run of `steps` steps and a recorded shadow of it: ms and worker CPU ms per step each."""
    before, began = worker.stats()["cpu_s"], time.perf_counter()
    handle = await start_run(env, VARIANT, steps, worker.queue)
    check_result(VARIANT, steps, await handle.result())
    normal_s, middle = time.perf_counter() - began, worker.stats()["cpu_s"]
    began = time.perf_counter()
    batch = await client.shadows.start([handle.workflow_id], Candidate(model=RECORDED))
    check_result(VARIANT, steps, await client.get(batch.pairs[0].shadow).result())
    shadow_s, after = time.perf_counter() - began, worker.stats()["cpu_s"]
    per_step = 1000 / (steps + 1)
    return {
        "normal_ms": normal_s * per_step,
        "shadow_ms": shadow_s * per_step,
        "normal_cpu_ms": (middle - before) * per_step,
        "shadow_cpu_ms": (after - middle) * per_step,
    }


async def _report_time(env: Env, client: RatchetClient, worker: WorkerProcess, runs: int) -> float:
    handles = await asyncio.gather(*(start_run(env, VARIANT, REPORT_STEPS, worker.queue) for _ in range(runs)))
    for handle in handles:
        check_result(VARIANT, REPORT_STEPS, await handle.result())
    began = time.perf_counter()
    batch = await client.shadows.start([h.workflow_id for h in handles], Candidate(model=RECORDED))
    report = await client.shadows.report(batch, wait_s=600)
    took = time.perf_counter() - began
    if report.totals.same != runs:
        raise RuntimeError(f"shadow: {report.totals.same} of {runs} recorded shadows reproduced their original")
    return took


def shadow_figures(section: dict[str, Any]) -> dict[str, float]:
    cells = section.get("cells") or []
    if not cells:
        return {}
    ms = {k: median(c[k] for c in cells) for k in ("normal_ms", "shadow_ms", "normal_cpu_ms", "shadow_cpu_ms")}
    return {
        "shadow_step_ratio": ms["shadow_ms"] / ms["normal_ms"],
        "shadow_cpu_ratio": ms["shadow_cpu_ms"] / ms["normal_cpu_ms"],
        "shadow_ms_per_step": ms["shadow_ms"],
        f"shadow_report_s_{section['runs']}": section["report_s"],
    }
