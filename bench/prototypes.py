"""Prototypes, bench only: AgentWorkflow variants that measure what a change would buy.

`LocalToolsAgentWorkflow`: fast read-only tools run as local activities.

A local activity runs in the worker that holds the workflow task and is recorded as one marker
event when the task completes: no ActivityTaskScheduled/Started/Completed, no extra workflow task,
so one server round trip per tool call fewer. Registered under its own workflow type so it can
never replace AgentWorkflow on a real task queue. Read-only tools only: a local activity that is
retried after a worker crash runs again, which a side effect must not.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RawValue, RetryPolicy

with workflow.unsafe.imports_passed_through():
    from ratchet.contracts import AgentResult, AgentState, EffectClass, RunPlan, ToolInvocation, ToolResult, ToolSpec
    from ratchet.workflows.agent import AgentWorkflow

LOCAL_WORKFLOW = "BenchAgentWorkflowLocal"
UNSANDBOXED_WORKFLOW = "BenchAgentWorkflowUnsandboxed"
LOCAL_UNSANDBOXED_WORKFLOW = "BenchAgentWorkflowLocalUnsandboxed"
LOCAL_MAX_TIMEOUT_S = 10.0
"""Only read-only tools whose own timeout is at most this run locally."""


@workflow.defn(name=LOCAL_WORKFLOW)
class LocalToolsAgentWorkflow(AgentWorkflow):
    @workflow.run
    async def run(self, raw: RawValue = None) -> AgentResult:  # type: ignore[assignment]
        return await super().run(raw)

    async def _execute_tool(
        self, state: AgentState, plan: RunPlan, spec: ToolSpec, key: str, call_id: str, args: dict[str, Any]
    ) -> ToolResult:
        local = spec.effect == EffectClass.READ_ONLY and spec.timeout_s <= LOCAL_MAX_TIMEOUT_S and not spec.heartbeat_s
        if not local:
            return await super()._execute_tool(state, plan, spec, key, call_id, args)
        return await workflow.execute_local_activity(
            f"tool.{spec.name}",
            ToolInvocation(
                key=key, workflow_id=state.workflow_id, step=state.step, call_id=call_id,
                tool=spec.name, arguments=args, workspace=plan.workspace,
            ),
            result_type=ToolResult,
            start_to_close_timeout=timedelta(seconds=spec.timeout_s),
            retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=500), maximum_attempts=spec.max_attempts),
            summary=f"step {state.step}: tool {spec.name}",
        )


@workflow.defn(name=UNSANDBOXED_WORKFLOW, sandboxed=False)
class UnsandboxedAgentWorkflow(AgentWorkflow):
    @workflow.run
    async def run(self, raw: RawValue = None) -> AgentResult:  # type: ignore[assignment]
        return await super().run(raw)


@workflow.defn(name=LOCAL_UNSANDBOXED_WORKFLOW, sandboxed=False)
class LocalUnsandboxedAgentWorkflow(LocalToolsAgentWorkflow):
    @workflow.run
    async def run(self, raw: RawValue = None) -> AgentResult:  # type: ignore[assignment]
        return await super().run(raw)


PROTOTYPES = [LocalToolsAgentWorkflow, UnsandboxedAgentWorkflow, LocalUnsandboxedAgentWorkflow]
