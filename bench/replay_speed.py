"""Replay speed: temporalio's Replayer over one long history, as `ratchet replay` runs it.

Figures from the same machine and moment: AgentWorkflow as `ratchet replay` runs it, the same
with activations inline on the event loop (the Replayer's debug_mode), and the raw-SDK floor's
history of the same number of steps, as written and in Ratchet's step shape (its tool a local activity).
"""

from __future__ import annotations

import time
from statistics import median
from typing import Any

from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from bench.floor import FloorLocalToolWorkflow, FloorWorkflow
from bench.harness import Env
from ratchet.payloads.converter import data_converter
from ratchet.ops.settings import Settings
from ratchet.workflows.agent import AgentWorkflow


async def _replay_once(replayer: Replayer, history: WorkflowHistory) -> float:
    began = time.perf_counter()
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    if result.replay_failure is not None:
        raise RuntimeError(f"replay failed: {result.replay_failure}")
    return time.perf_counter() - began


def _speeds(history: WorkflowHistory, times: list[float]) -> dict[str, float]:
    events = len(history.events)
    return {"events": events, "first_s": times[0], "median_s": median(times), "best_s": min(times),
            "events_per_s": events / median(times), "best_events_per_s": events / min(times),
            "first_events_per_s": events / times[0], "bytes": sum(e.ByteSize() for e in history.events)}


async def replay_speeds(env: Env, ratchet: WorkflowHistory, floor: WorkflowHistory | None,
                        floor_local: WorkflowHistory | None = None, repeats: int = 3) -> dict[str, Any]:
    converter = data_converter(Settings(artifact_dir=env.root / "artifacts"))
    cases = {
        "ratchet": (Replayer(workflows=[AgentWorkflow], data_converter=converter), ratchet),
        # activations on the event loop instead of a thread pool: no hop, but no deadlock detector either
        "inline": (Replayer(workflows=[AgentWorkflow], data_converter=converter, debug_mode=True), ratchet),
    }
    if floor is not None:
        cases["floor"] = (Replayer(workflows=[FloorWorkflow]), floor)
    if floor_local is not None:  # the floor in Ratchet's step shape: its tool a local activity
        cases["floor_local"] = (Replayer(workflows=[FloorLocalToolWorkflow]), floor_local)
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(repeats):  # interleaved: load drift on a shared machine hits every case alike
        for name, (replayer, history) in cases.items():
            times[name].append(await _replay_once(replayer, history))
    return {name: _speeds(history, times[name]) for name, (_, history) in cases.items()}
