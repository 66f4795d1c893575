"""The floor: the same N-step task written directly on the Temporal SDK (and in Ratchet's step shape).

One model activity and one tool activity per step, minimal payloads (ints and short strings), a
scripted "model" that asks for the tool until the last step. Default data converter, default
sandbox, the same timeouts as Ratchet's calls. Nothing here imports Ratchet.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import activity, workflow
from temporalio.common import RetryPolicy

FLOOR_WORKFLOW = "BenchFloor"
RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_attempts=5)


@activity.defn(name="floor.model")
async def floor_model(turn: list[int]) -> str:
    """Scripted model: [step, steps] -> the tool to call, or "" for the final answer."""
    step, steps = turn
    return "echo" if step <= steps else ""


@activity.defn(name="floor.tool")
async def floor_tool(step: int) -> str:
    return f"echo {step}"


async def _steps(steps: int, local_tool: bool) -> int:
    step = 0
    while True:
        step += 1
        call = await workflow.execute_activity(
            floor_model, [step, steps], start_to_close_timeout=timedelta(seconds=90), retry_policy=RETRY
        )
        if not call:
            return step - 1
        run_tool = workflow.execute_local_activity if local_tool else workflow.execute_activity
        await run_tool(floor_tool, step, start_to_close_timeout=timedelta(seconds=30), retry_policy=RETRY)


@workflow.defn(name=FLOOR_WORKFLOW)
class FloorWorkflow:
    @workflow.run
    async def run(self, steps: int) -> int:
        return await _steps(steps, local_tool=False)


FLOOR_LOCAL_WORKFLOW = "BenchFloorLocalTool"


@workflow.defn(name=FLOOR_LOCAL_WORKFLOW)
class FloorLocalToolWorkflow:
    """The floor in Ratchet's step shape: its tool a local activity (as Ratchet runs a fast read-only
    tool), so a step is one activity, one local activity and their workflow tasks, with nothing of
    Ratchet's own work (ledger, billing, transcript, state): what this shape costs on the SDK alone."""

    @workflow.run
    async def run(self, steps: int) -> int:
        return await _steps(steps, local_tool=True)


FLOOR_SESSION = "BenchFloorSession"


@workflow.defn(name=FLOOR_SESSION)
class FloorSession:
    """The session floor: an update answered with one activity, then the next awaited, until `close`."""

    def __init__(self) -> None:
        self.closed = False

    @workflow.run
    async def run(self) -> None:
        await workflow.wait_condition(lambda: self.closed)

    @workflow.update(name="ask")
    async def ask(self, turn: int) -> str:
        return await workflow.execute_activity(
            floor_tool, turn, start_to_close_timeout=timedelta(seconds=30), retry_policy=RETRY
        )

    @workflow.signal(name="close")
    def close(self) -> None:
        self.closed = True


ACTIVITIES = [floor_model, floor_tool]
