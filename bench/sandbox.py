"""Sandbox cost: agent steps whose one tool call is `run_command` with a ~10 ms command (`sleep 0.01`),
the worker's sandbox nsjail against RATCHET_SANDBOX=off, in the same bench run (issue 14).

Each repetition starts two fresh workers, one per backend (named in its environment), runs one
cold run on each outside the clock, then alternates timed runs of N steps between them (the order
flipping every round), so drift on a shared machine reaches both backends alike; a cell is one
backend's runs in one repetition. Worker CPU from /proc around each run, which counts reaped
children: nsjail and the command are in it. A step is a model call, then `run_command` as a regular
activity on the workspace's host queue, through the ledger (it is irreversible). Beside the wall
time, the cells keep the run_command activity's own time (started -> completed, server clock): what
the sandbox adds to a call, apart from the queueing around it.
`sandbox_step_ratio` is nsjail's median ms/step over off's.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from pathlib import Path
from statistics import median
from typing import Any

from temporalio.client import WorkflowHistory

from bench.harness import Env, Variant, WorkerProcess, check_result, machine_load, start_run
from bench.progress import Progress
from ratchet.client import RunHandle
from ratchet.contracts import AGENT_WORKFLOW
from ratchet.sandbox.choose import UNCONFINED_WARNING

COMMAND = ["sleep", "0.01"]
TOOL_ACTIVITY = "tool.run_command"
PROFILE = "bench_sandbox"
"""bench/plugin.py: `run_command` only, allowed (it is irreversible), no verifier."""
NSJAIL, OFF = "sandbox_nsjail", "sandbox_off"
VARIANTS = {
    name: Variant(name, "ratchet", AGENT_WORKFLOW, profile=PROFILE, tool="run_command",
                  env=(("RATCHET_SANDBOX", backend),), label=f"run_command `sleep 0.01`, RATCHET_SANDBOX={backend}")
    for name, backend in ((NSJAIL, "nsjail"), (OFF, "off"))
}


def run_input(root: Path, steps: int) -> dict[str, Any]:
    """N steps of `run_command COMMAND`, then an answer; the script a file in the bench workspace
    (out of the run input and history, as bench.harness does for the other cells)."""
    name = f"script-sandbox-{steps}.json"
    path = root / "workspaces" / "bench" / name
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        calls = [{"tool_calls": [{"name": "run_command", "arguments": {"argv": COMMAND}}]} for _ in range(steps)]
        path.write_text(json.dumps([*calls, {"content": "done"}]))
    return {"agent": PROFILE, "objective": f"bench {steps} commands", "workspace": "bench",
            "model": {"provider": "scripted", "options": {"script_file": name}}, "budget": {"max_steps": steps + 1}}


async def timed_run(env: Env, variant: Variant, steps: int, queue: str) -> tuple[float, RunHandle]:
    began = time.perf_counter()
    handle = await start_run(env, variant, steps, queue, run_input(env.root, steps))
    check_result(variant, steps, await handle.result())
    return time.perf_counter() - began, handle


async def check_commands(handle: RunHandle, steps: int) -> None:
    """Every step's command ran and exited 0: a refused or failed call must not be timed as a step."""
    outputs = [c.result.output for c in (await handle.state()).calls.tool_calls.items]
    if len(outputs) != steps or any(not o.startswith("exit code 0") for o in outputs):
        raise RuntimeError(f"run_command did not run cleanly in {handle.workflow_id}: {outputs[:3]}")


async def started(env: Env, variant: Variant, steps: int, stack: contextlib.AsyncExitStack) -> tuple[WorkerProcess, float]:
    """A worker for `variant` (stopped with `stack`), checked to run the backend it names, and its
    cold run's wall time (both workers start at once: the cold runs are not compared); every
    command of it exited 0."""
    worker = await stack.enter_async_context(env.worker(variant))
    cold_s, handle = await timed_run(env, variant, steps, worker.queue)
    await check_commands(handle, steps)
    if (UNCONFINED_WARNING[:40] in worker.output) != (variant.name == OFF):
        raise RuntimeError(f"{variant.name}: the worker's sandbox is not the one the cell names (log: {worker.log})")
    return worker, cold_s


async def sandbox_pair(env: Env, steps: int, runs: int, rep: int) -> list[dict[str, Any]]:
    """One repetition: both workers, `runs` timed runs each, alternating; a cell per backend."""
    async with contextlib.AsyncExitStack() as stack:
        both = await asyncio.gather(*(started(env, VARIANTS[name], steps, stack) for name in (NSJAIL, OFF)))
        workers = dict(zip((NSJAIL, OFF), both))
        walls: dict[str, list[float]] = {name: [] for name in workers}
        cpu_s = dict.fromkeys(workers, 0.0)
        tool_ms: dict[str, list[float]] = {name: [] for name in workers}
        for i in range(runs):
            for name in (NSJAIL, OFF) if (i + rep) % 2 == 0 else (OFF, NSJAIL):
                worker = workers[name][0]
                before = worker.stats()["cpu_s"]
                wall, handle = await timed_run(env, VARIANTS[name], steps, worker.queue)
                cpu_s[name] += worker.stats()["cpu_s"] - before
                walls[name].append(wall)
                tool_ms[name] += activity_ms(await handle.history(), TOOL_ACTIVITY)
    return [{
        "variant": name, "rep": rep, "steps": steps, "cold_s": workers[name][1],
        "ms_per_step": median(walls[name]) / steps * 1000, "walls_s": walls[name],
        "cpu_ms_per_step": cpu_s[name] / (runs * steps) * 1000, "tool_ms": median(tool_ms[name]),
        "load": machine_load(),
    } for name in workers]


def activity_ms(history: WorkflowHistory, activity: str) -> list[float]:
    """Started -> completed of each `activity` in the history, by the server's clock: the tool's
    own time (the worker's code, the ledger, the program), without queueing."""
    kinds: dict[int, str] = {}
    started: dict[int, float] = {}
    out = []
    for event in history.events:
        t = event.event_time.seconds + event.event_time.nanos / 1e9
        if event.HasField("activity_task_scheduled_event_attributes"):
            kinds[event.event_id] = event.activity_task_scheduled_event_attributes.activity_type.name
        elif event.HasField("activity_task_started_event_attributes"):
            started[event.activity_task_started_event_attributes.scheduled_event_id] = t
        elif event.HasField("activity_task_completed_event_attributes"):
            scheduled = event.activity_task_completed_event_attributes.scheduled_event_id
            if kinds.get(scheduled) == activity:
                out.append((t - started[scheduled]) * 1000)
    return out


async def sandbox_cost(env: Env, progress: Progress, steps: int, reps: int, runs: int) -> list[dict[str, Any]]:
    """`reps` repetitions of `sandbox_pair`."""
    cells = []
    for rep in range(reps):
        progress.begin(f"sandbox: nsjail and off, {runs} runs of {steps} steps each, alternating, rep {rep + 1}/{reps}")
        pair = await sandbox_pair(env, steps, runs, rep)
        cells += pair
        progress.end(", ".join(f"{c['variant']} {c['ms_per_step']:.1f} ms/step (CPU {c['cpu_ms_per_step']:.1f})" for c in pair))
    return cells


def sandbox_figures(cells: list[dict[str, Any]]) -> dict[str, float]:
    """nsjail over off: wall ms/step (ratio and difference), worker CPU ms/step and the run_command
    activity's own ms (differences), medians over repetitions."""
    keys = ("ms_per_step", "cpu_ms_per_step", "tool_ms")
    med = {name: {k: median(c[k] for c in cells if c["variant"] == name) for k in keys}
           for name in (NSJAIL, OFF) if any(c["variant"] == name for c in cells)}
    if len(med) < 2:
        return {}
    return {
        "sandbox_step_ratio": med[NSJAIL]["ms_per_step"] / med[OFF]["ms_per_step"],
        "sandbox_ms_per_step_delta": med[NSJAIL]["ms_per_step"] - med[OFF]["ms_per_step"],
        "sandbox_cpu_ms_per_step_delta": med[NSJAIL]["cpu_ms_per_step"] - med[OFF]["cpu_ms_per_step"],
        "sandbox_tool_ms_delta": med[NSJAIL]["tool_ms"] - med[OFF]["tool_ms"],
    }


def sandbox_rows(cells: list[dict[str, Any]]) -> tuple[list[str], list[list[Any]]]:
    """The report's table: one row per cell."""
    header = ["variant", "rep", "N", "ms/step", "worker CPU ms/step", "run_command activity ms (median)", "cold first run s"]
    rows = [[c["variant"], c["rep"], c["steps"], c["ms_per_step"], c["cpu_ms_per_step"], c["tool_ms"],
             c["cold_s"]] for c in sorted(cells, key=lambda c: (c["variant"], c["rep"]))]
    return header, rows
