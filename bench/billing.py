"""The billing ledger under measure (issue 42): `billing_cpu_ratio`, the worker's CPU per model
call with the billing ledger (a row per attempt in the ledger's SQLite database, written in the
thread that writes the reply's transcript segment, and its two metrics) over the same worker
without it (`BENCH_BILLING=0`: bench/worker_proc.py builds its options with `billing=None`, a
switch only the bench has).

Each repetition runs one run of N steps (N+1 model calls) on each worker, taking turns, the
order swapped every repetition; CPU from /proc around each run. Medians over the repetitions.
"""

from __future__ import annotations

from statistics import median
from typing import Any

from bench.harness import VARIANTS, Env, WorkerProcess, check_result, start_run
from bench.progress import Progress

WITH, WITHOUT = VARIANTS["ratchet"], VARIANTS["no_billing"]


async def billing_cost(env: Env, progress: Progress, steps: int, reps: int) -> dict[str, Any]:
    async with env.worker(WITH) as billed, env.worker(WITHOUT) as plain:
        progress.begin(f"billing: {reps} runs of {steps} steps with the billing ledger and without")
        workers = [(WITH, billed), (WITHOUT, plain)]
        for variant, worker in workers:  # warm: each worker's first run, outside the clock
            await _cpu_per_call(env, variant, worker, steps)
        cells = []
        for rep in range(reps):
            cell = {}
            for variant, worker in workers if rep % 2 == 0 else workers[::-1]:
                cell[variant.name] = await _cpu_per_call(env, variant, worker, steps)
            cells.append({"with_cpu_ms": cell[WITH.name], "without_cpu_ms": cell[WITHOUT.name]})
        figures = billing_figures({"cells": cells})
        progress.end(f"with/without CPU per model call {figures.get('billing_cpu_ratio', 0):.3f}")
    return {"steps": steps, "cells": cells}


async def _cpu_per_call(env: Env, variant: Any, worker: WorkerProcess, steps: int) -> float:
    before = worker.stats()["cpu_s"]
    handle = await start_run(env, variant, steps, worker.queue)
    check_result(variant, steps, await handle.result())
    return (worker.stats()["cpu_s"] - before) * 1000 / (steps + 1)


def billing_figures(section: dict[str, Any]) -> dict[str, float]:
    cells = section.get("cells") or []
    if not cells:
        return {}
    with_ms, without_ms = median(c["with_cpu_ms"] for c in cells), median(c["without_cpu_ms"] for c in cells)
    return {"billing_cpu_ratio": with_ms / without_ms, "billing_cpu_ms_per_call": with_ms}
