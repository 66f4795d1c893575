"""`StartGuard`: a start with more (or fewer) inputs than a Ratchet workflow takes fails the run as
`InvalidInput`, at once.

Without it, `temporal workflow start --input A --input B` calls `run(self, raw)` with two values:
the `TypeError` happens in workflow code, so it fails the workflow *task*, which Temporal retries
forever. What a single input holds is checked by the workflow itself (workflows/input.py); this
checks only how many there are, before the run method is called, for every workflow the plugin
registers (`ratchet.plugin.WORKFLOWS`), and leaves other workflows on the worker alone.

Left open: with two or more inputs the SDK decodes them without type hints before any interceptor
runs, so an extra input it cannot decode at all (a made-up `--input-meta encoding=...`) still
fails the task. The Temporal CLI only sends JSON by default.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from typing import Any

from temporalio import workflow
from temporalio.worker import (
    ExecuteWorkflowInput,
    Interceptor,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
)

from ratchet.workflows.input import invalid


def check_arity(input: ExecuteWorkflowInput) -> None:
    """Raise `InvalidInput` unless the run method can take `input.args` as given."""
    signature = inspect.signature(input.run_fn)  # unbound: self first
    try:
        signature.bind(None, *input.args)
    except TypeError:
        positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        takes = sum(p.kind in positional for p in list(signature.parameters.values())[1:])
        raise invalid(
            f"{workflow.info().workflow_type} takes {takes} input{'' if takes == 1 else 's'}, got "
            f"{len(input.args)}: start it with a single --input holding one JSON object"
        ) from None


class StartGuard(Interceptor):
    """A worker interceptor that checks the number of start inputs of `workflows` (classes)."""

    def __init__(self, workflows: Iterable[type]) -> None:
        guarded = frozenset(workflows)

        class Inbound(WorkflowInboundInterceptor):
            async def execute_workflow(self, input: ExecuteWorkflowInput) -> Any:
                if input.type in guarded:
                    check_arity(input)
                return await super().execute_workflow(input)

        self._inbound = Inbound

    def workflow_interceptor_class(self, input: WorkflowInterceptorClassInput) -> type[WorkflowInboundInterceptor]:
        return self._inbound
