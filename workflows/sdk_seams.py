"""Every private member of temporalio that Ratchet uses, in this one module.

Each use says why it is needed and which public hook of the SDK would replace it (issue 37: they
can go upstream). tests/unit/test_sdk_seams.py checks each one on the installed SDK, so an upgrade
that renames or removes one fails there rather than in a run. Nothing else in ratchet/, workflows/,
activities/ or worker/ names a private member of temporalio (that test also greps for them).

In workflows/ because the run's stream is workflow code (the determinism check reads this module);
the plugin and the replay gate import the rest from here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import temporalio.activity
from temporalio import workflow
from temporalio.contrib.workflow_streams import PollInput, PollResult, WorkflowStream, WorkflowStreamState

# --- the run's stream (temporalio.contrib.workflow_streams, experimental) ----------------------

OFFSET_QUERY = "__temporal_workflow_stream_offset"
"""The stream's offset query, a wire name (WorkflowStream's docstring lists it; its clients use
it): its handler, read through the public `workflow.get_query_handler`, is the one way to the log's
end. Public hook wanted: a `WorkflowStream.offset` property (and `base_offset`)."""


class ObservedStream(WorkflowStream):
    """The SDK's stream, with the log's bounds and what its long polls answered (how far readers
    have read, and when). Construct it from a method named `__init__` (the SDK checks its caller)."""

    def __init__(self, prior: WorkflowStreamState | None) -> None:
        super().__init__(prior)
        offset = workflow.get_query_handler(OFFSET_QUERY)
        if offset is None:
            raise RuntimeError(f"the SDK's WorkflowStream registered no {OFFSET_QUERY!r} query")
        self._offset: Callable[[], int] = offset
        self.base = prior.base_offset if prior is not None else 0
        """The offset of the oldest item kept: only `truncate` moves it (public: the state it was
        handed over in, and what was truncated since)."""
        self.served = 0
        """The offset after the last item a poll returned."""
        self.polled_s = float("-inf")
        """When (workflow time) a poll last returned."""

    @property
    def end(self) -> int:
        """The offset after the last item in the log (the workflow's and the activities' items)."""
        return self._offset()

    def truncate(self, up_to_offset: int) -> None:
        super().truncate(up_to_offset)
        self.base = max(self.base, up_to_offset)

    async def _on_poll(self, payload: PollInput) -> PollResult:
        """PRIVATE: the SDK registers this method as the poll update's handler in its `__init__`;
        overriding it is the only way to see a poll's answer (its validator cannot be read back, so
        the handler cannot be wrapped by name with `workflow.set_update_handler` either). Public
        hook wanted: an `on_poll` callback, or the offset and time of the last answered poll."""
        result = await super()._on_poll(payload)
        self.served = max(self.served, result.next_offset)
        self.polled_s = workflow.now().timestamp()
        return result


# --- definitions: the names @workflow.defn and @activity.defn gave ------------------------------


def workflow_name(cls: type, *, required: bool = False) -> str | None:
    """The name `@workflow.defn` gave `cls`; None for a dynamic workflow or (unless `required`:
    ValueError) a class that is not a workflow. PRIVATE: `temporalio.workflow._Definition`, the
    SDK's own reading of the decorator (a class's name is not always its workflow's). Public hook
    wanted: `workflow.definition_name(cls)` or a public `Definition`."""
    if required:
        return workflow._Definition.must_from_class(cls).name
    defn = workflow._Definition.from_class(cls)
    return defn.name if defn is not None else None


def activity_name(fn: Callable[..., Any]) -> str | None:
    """The name `@activity.defn` gave `fn`; None when it is not an activity (or a dynamic one).
    PRIVATE: `temporalio.activity._Definition`, as for workflows. Public hook wanted:
    `activity.definition_name(fn)` or a public `Definition`."""
    defn = temporalio.activity._Definition.from_callable(fn)
    return defn.name if defn is not None else None


# --- logging ----------------------------------------------------------------------------------

WORKFLOW_TASK_LOGGER = "temporalio.worker._workflow_instance"
"""PRIVATE: the logger (a private module's `__name__`) that writes the traceback of every workflow
task that fails; the replay gate quiets it, its table says what failed. The parent logger
(`temporalio.worker`) would quiet the worker's other warnings too. Public hook wanted: a documented
logger name, or a `Replayer` option not to log failed tasks."""
