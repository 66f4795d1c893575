"""Replay speed: temporalio's Replayer over one long history, as `ratchet replay` runs it.

Three figures from the same machine and moment: AgentWorkflow as deployed (sandboxed), the same
class outside the sandbox (what `sandboxed=False` would buy), and the raw-SDK floor's history of
the same number of steps.
"""

from __future__ import annotations

import time
from statistics import median
from typing import Any

from temporalio import workflow
from temporalio.client import WorkflowHistory
from temporalio.common import RawValue
from temporalio.worker import Replayer

from bench.floor import FloorWorkflow
from bench.harness import Env
from ratchet.contracts import AgentResult
from ratchet.converter import data_converter
from ratchet.settings import Settings
from workflows.agent import AgentWorkflow


@workflow.defn(name="AgentWorkflow", sandboxed=False)
class UnsandboxedTwin(AgentWorkflow):
    """AgentWorkflow outside the sandbox, under its own name: replays AgentWorkflow histories.
    Only ever given to a Replayer here, never to a worker."""

    @workflow.run
    async def run(self, raw: RawValue = None) -> AgentResult:  # type: ignore[assignment]
        return await super().run(raw)


async def _replay(replayer: Replayer, history: WorkflowHistory, repeats: int) -> dict[str, float]:
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
        times.append(time.perf_counter() - began)
        if result.replay_failure is not None:
            raise RuntimeError(f"replay failed: {result.replay_failure}")
    events = len(history.events)
    return {"events": events, "first_s": times[0], "median_s": median(times),
            "events_per_s": events / median(times), "first_events_per_s": events / times[0],
            "bytes": sum(e.ByteSize() for e in history.events)}


async def replay_speeds(env: Env, ratchet: WorkflowHistory, floor: WorkflowHistory | None, repeats: int = 3) -> dict[str, Any]:
    converter = data_converter(Settings(artifact_dir=env.root / "artifacts"))
    out = {
        "ratchet": await _replay(Replayer(workflows=[AgentWorkflow], data_converter=converter), ratchet, repeats),
        "unsandboxed": await _replay(Replayer(workflows=[UnsandboxedTwin], data_converter=converter), ratchet, repeats),
    }
    if floor is not None:
        out["floor"] = await _replay(Replayer(workflows=[FloorWorkflow]), floor, repeats)
    return out
