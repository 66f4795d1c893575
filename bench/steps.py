"""Step cost and history cost: the same N-step task per variant, each cell in a fresh worker.

A cell is (variant, N, repetition): start a worker process, time its first run (the cold start),
then time `warm_runs` more runs and read the worker's and the server's CPU around them. Cells are
interleaved (every N, then every repetition, the variant order rotating), so drift on a busy
machine spreads over all variants instead of favouring the one that ran first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AsyncExitStack
from statistics import median
from typing import Any

from bench.harness import VARIANTS, Env, Variant, run_history, machine_load, model_activity, timed_run
from bench.history import analyze, payload_fields
from bench.progress import Progress
from bench.store_calls import COUNT_ENV


async def step_cell(env: Env, variant: Variant, steps: int, warm_runs: int) -> dict[str, Any]:
    counting = dict(variant.env).get(COUNT_ENV) == "1"
    async with env.worker(variant) as worker, AsyncExitStack() as others:
        for other in env.other_hosts(variant, worker.queue):
            await others.enter_async_context(other)
        cold_s, _ = await timed_run(env, variant, steps, worker.queue)
        calls_before = worker.store_calls() if counting else {}
        before, server_before = worker.stats(), env.server_cpu_s()
        walls = []
        for _ in range(warm_runs):
            wall, handle = await timed_run(env, variant, steps, worker.queue)
            walls.append(wall)
        after, server_after = worker.stats(), env.server_cpu_s()
        calls_after = worker.store_calls() if counting else {}
        raw = await run_history(handle)
        history = analyze(raw, model_activity(variant))
    total_steps = warm_runs * steps
    calls = {name: (n - calls_before.get(name, 0)) / total_steps for name, n in sorted(calls_after.items())}
    return {
        "variant": variant.name, "steps": steps, "startup_s": worker.startup_s, "cold_s": cold_s,
        "ms_per_step": median(walls) / steps * 1000, "walls_s": walls,
        "cpu_ms_per_step": (after["cpu_s"] - before["cpu_s"]) / total_steps * 1000,
        "server_cpu_ms_per_step": (server_after - server_before) / total_steps * 1000,
        "rss_mib": after["rss_mib"], "prepare_ms": history.start_to_first_model_s * 1000,
        "events": history.events, "bytes": history.bytes, "largest_event": history.largest_event,
        "input_bytes": history.input_bytes, "wft_timeouts": history.wft_timeouts,
        **history.per_step(steps), "load": machine_load(), "fields": payload_fields(raw, steps),
        **({"store_calls_per_step": calls} if counting else {}),
    }


def plan(variants: Sequence[str], steps_list: Sequence[int], reps: int) -> list[tuple[int, int, str]]:
    """(rep, steps, variant) in interleaved order: the variant order rotates with every cell group."""
    cells, turn = [], 0
    for rep in range(reps):
        for steps in steps_list:
            order = list(variants[turn % len(variants):]) + list(variants[: turn % len(variants)])
            cells += [(rep, steps, v) for v in order]
            turn += 1
    return cells


async def step_cost(
    env: Env, progress: Progress, variants: Sequence[str], steps_list: Sequence[int], reps: int, warm_runs: int,
    section: str = "step cost", table: Mapping[str, Variant] = VARIANTS,
) -> list[dict[str, Any]]:
    """Cells of `variants` (names in `table`) at every N, `reps` times, interleaved."""
    cells = []
    for rep, steps, name in plan(variants, steps_list, reps):
        progress.begin(f"{section}: {name} N={steps} rep {rep + 1}/{reps}")
        cell = await step_cell(env, table[name], steps, warm_runs)
        cell["rep"] = rep
        cells.append(cell)
        progress.end(f"{cell['ms_per_step']:.0f} ms/step, worker CPU {cell['cpu_ms_per_step']:.1f} ms/step, "
                     f"cold {cell['cold_s']:.2f} s")
    return cells


def cell_medians(cells: list[dict[str, Any]]) -> dict[tuple[str, int], dict[str, float]]:
    """(variant, N) -> the median over repetitions of every numeric figure of its cells."""
    groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for cell in cells:
        groups.setdefault((cell["variant"], cell["steps"]), []).append(cell)
    out = {}
    for key, group in groups.items():
        numeric = [k for k, v in group[0].items() if isinstance(v, (int, float)) and k not in ("steps", "rep")]
        out[key] = {k: median(c[k] for c in group) for k in numeric}
        out[key]["reps"] = len(group)
        out[key]["ms_per_step_min"] = min(c["ms_per_step"] for c in group)
        out[key]["ms_per_step_max"] = max(c["ms_per_step"] for c in group)
        out[key]["wft_timeouts"] = sum(c["wft_timeouts"] for c in group)
    return out


def step_figures(cells: list[dict[str, Any]]) -> dict[str, float]:
    """The headline ratios against the floor: per-step figures at the largest N (fixed costs
    amortized), cold start at the smallest N, history growth Ratchet N_max / N_min."""
    med = cell_medians(cells)
    steps = sorted({n for _, n in med})
    small, large = steps[0], steps[-1]
    figures: dict[str, float] = {}

    def ratio(variant: str, n: int, key: str) -> float | None:
        if (variant, n) not in med or ("floor", n) not in med or not med[("floor", n)][key]:
            return None
        return med[(variant, n)][key] / med[("floor", n)][key]

    wanted = {
        "step_time_ratio": ("ratchet", large, "ms_per_step"),
        "worker_cpu_ratio": ("ratchet", large, "cpu_ms_per_step"),
        "server_cpu_ratio": ("ratchet", large, "server_cpu_ms_per_step"),
        "cold_start_ratio": ("ratchet", small, "cold_s"),
        "history_bytes_ratio": ("ratchet", large, "bytes_per_step"),
        "history_events_ratio": ("ratchet", large, "events_per_step"),
        "step_time_ratio_regular": ("regular", large, "ms_per_step"),
        "step_time_ratio_workspace": ("workspace", large, "ms_per_step"),
        "worker_cpu_ratio_workspace": ("workspace", large, "cpu_ms_per_step"),
        "history_bytes_ratio_workspace": ("workspace", large, "bytes_per_step"),
        "cold_start_ratio_coder": ("workspace", small, "cold_s"),
        "step_time_ratio_workspace_write": ("workspace_write", large, "ms_per_step"),
        "step_time_ratio_workspace_2hosts": ("workspace_2hosts", large, "ms_per_step"),
        "worker_cpu_ratio_regular": ("regular", large, "cpu_ms_per_step"),
        "history_bytes_ratio_regular": ("regular", large, "bytes_per_step"),
    }
    for name, args in wanted.items():
        value = ratio(*args)
        if value is not None:
            figures[name] = value
    for n in steps:
        value = ratio("ratchet", n, "ms_per_step")
        if value is not None:
            figures[f"step_time_ratio_n{n}"] = value
    if ("ratchet", small) in med and ("ratchet", large) in med and small != large:
        figures["history_growth"] = med[("ratchet", large)]["bytes_per_step"] / med[("ratchet", small)]["bytes_per_step"]
    return figures


def component_figures(cells: list[dict[str, Any]]) -> dict[str, float]:
    """What each optional piece costs per step, against plain Ratchet in the same cells. Wall time
    as the best repetition (noise on a shared machine only ever adds time), CPU as the median."""
    med = cell_medians(cells)
    figures: dict[str, float] = {}
    for (variant, n), row in med.items():
        base = med.get(("ratchet", n))
        if base is None or variant == "ratchet":
            continue
        figures[f"{variant}_best_ms_per_step_delta"] = row["ms_per_step_min"] - base["ms_per_step_min"]
        figures[f"{variant}_cpu_ms_per_step_delta"] = row["cpu_ms_per_step"] - base["cpu_ms_per_step"]
        if variant == "guarded":  # five pattern guardrails checked every step, against none
            figures["guardrail_step_ratio"] = row["ms_per_step_min"] / base["ms_per_step_min"]
            figures["guardrail_cpu_ratio"] = row["cpu_ms_per_step"] / base["cpu_ms_per_step"]
    return figures
