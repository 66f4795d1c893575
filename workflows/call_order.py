"""The order of one reply's tool calls (deterministic, no I/O; workflows/acting.py runs them)."""

from __future__ import annotations

from collections.abc import Awaitable

from temporalio import workflow

from ratchet.contracts import EffectClass, RunPlan, ToolCallRequest, ToolResult


class CallOrder:
    """The order of one reply's calls. A call that is not read-only (a write, a ticket, `wait`,
    `delegate`) runs alone, after every call before it in the reply, so a read after a write sees
    it and two writes of one path never race; consecutive read-only calls run concurrently.
    Approvals are asked for at once for every call of the reply that needs one: an approved call
    then waits for its turn. After a call failed the run, later calls do not run."""

    def __init__(self, plan: RunPlan, calls: list[ToolCallRequest]) -> None:
        self.after: list[int] = []
        """Call i runs once calls 0 .. after[i] - 1 have finished."""
        for i, call in enumerate(calls):
            together = i > 0 and concurrent(plan, call) and concurrent(plan, calls[i - 1])
            self.after.append(self.after[-1] if together else i)
        self.finished: set[int] = set()
        self.started: set[int] = set()
        self.results: dict[int, ToolResult] = {}
        self.failed = False

    async def turn(self, i: int) -> bool:
        """Wait until call i may run; False if an earlier call failed (it must not run then)."""
        if not self._ready(i):
            await workflow.wait_condition(lambda: self._ready(i))
        self.started.add(i)
        return not self.failed

    def _ready(self, i: int) -> bool:
        return self.failed or all(j in self.finished for j in range(self.after[i]))

    async def run(self, i: int, call: Awaitable[ToolResult]) -> ToolResult:
        try:
            self.results[i] = result = await call
            return result
        except BaseException:
            self.failed = True
            raise
        finally:
            self.finished.add(i)


def concurrent(plan: RunPlan, call: ToolCallRequest) -> bool:
    """Read-only activity tools, and calls answered without running anything (unknown tools)."""
    spec = plan.tool(call.name)
    return spec is None or (spec.kind == "activity" and spec.effect == EffectClass.READ_ONLY)
