"""A shadow run's quarantine (deterministic, no I/O): which of its tool calls run, and what the
others answer.

Decided here, on the one tool path (workflows/acting.py asks `answer` before a call would wait for
approval or be scheduled), from the run's input (`AgentRun.shadow`): every worker enforces it and a
shadow needs no queue of its own. A call `runs_in_shadow` allows (read-only, or compensable in the
workspace, which for a shadow is its private copy) runs as usual. Any other never runs: it gets the
original's recorded result when the original made the same call (same tool, canonical arguments),
else the quarantine result, and is kept in `state.calls` marked (`ToolCallRecord.shadow`), its
arguments as the model wrote them: the would-have-called.
"""

from __future__ import annotations

from typing import Any

from ratchet.contracts import (
    QUARANTINED,
    AgentState,
    ErrorType,
    ToolCallRecord,
    ToolCallRequest,
    ToolResult,
    ToolSpec,
    recorded_call,
    runs_in_shadow,
)
from ratchet.core import keys


def answer(
    state: AgentState, spec: ToolSpec, call: ToolCallRequest, call_id: str, args: dict[str, Any]
) -> ToolResult | None:
    """None: the call runs (not a shadow, or a tool a shadow may run); else its answer, the call
    recorded with its mark (before any approval: a call that does not run waits for nobody)."""
    shadow = state.run.shadow
    if shadow is None or runs_in_shadow(spec):
        return None
    found = recorded_call(shadow.recorded, spec.name, args)
    if found is not None:
        result = ToolResult(ok=found.ok, output=found.output, output_ref=found.output_ref, error_type=found.error_type)
    else:
        result = ToolResult(ok=False, output=QUARANTINED, error_type=ErrorType.QUARANTINED)
    state.used.tool_calls += 1
    state.calls.record(
        ToolCallRecord(
            step=state.step,
            call_id=call_id,
            tool=spec.name,
            key=keys.call_key(state.workflow_id, state.step, call_id),
            arguments=call.arguments,
            result=result,
            shadow="recorded" if found is not None else "quarantined",
        )
    )
    return result
