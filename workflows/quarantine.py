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
    ShadowMark,
    ToolResult,
    ToolSpec,
    recorded_call,
    runs_in_shadow,
)


def answer(state: AgentState, spec: ToolSpec, args: dict[str, Any]) -> tuple[ToolResult, ShadowMark] | None:
    """None: the call runs (not a shadow, or a tool a shadow may run); else its answer and mark."""
    shadow = state.run.shadow
    if shadow is None or runs_in_shadow(spec):
        return None
    found = recorded_call(shadow.recorded, spec.name, args)
    if found is not None:
        result = ToolResult(ok=found.ok, output=found.output, output_ref=found.output_ref, error_type=found.error_type)
        return result, "recorded"
    return ToolResult(ok=False, output=QUARANTINED, error_type=ErrorType.QUARANTINED), "quarantined"
