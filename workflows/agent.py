"""AgentWorkflow: the agent's explicit state machine, THINK -> ACT -> ... -> a terminal phase.

Deterministic and free of I/O: every model call and tool call is an activity; all state is an
`AgentState` (queryable at any moment).
"""

from __future__ import annotations

import asyncio
import json
from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RawValue, RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    # Contracts and pure helpers only: pydantic and the standard library.
    from pydantic import ValidationError

    from ratchet import budget as budgets
    from ratchet import keys
    from ratchet.contracts import (
        AgentResult,
        AgentRun,
        AgentState,
        Message,
        ModelReply,
        ModelRequest,
        Phase,
        PrepareRun,
        RunPlan,
        ToolCallRecord,
        ToolCallRequest,
        ToolInvocation,
        ToolResult,
    )
    from workflows.input import parse_run

INVALID_ARGUMENTS = "InvalidArguments"
MODEL_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=60),
    maximum_attempts=8,
)


@workflow.defn(name="AgentWorkflow")
class AgentWorkflow:
    def __init__(self) -> None:
        self._state: AgentState | None = None

    @workflow.run
    async def run(self, raw: RawValue = None) -> AgentResult:  # type: ignore[assignment]
        info = workflow.info()
        run = parse_run(raw)
        self._state = state = AgentState(
            workflow_id=info.workflow_id, run=run, started_at=workflow.now().isoformat()
        )
        state.plan = plan = await self._prepare(run)
        state.messages = [
            Message(role="system", content=plan.system_prompt),
            Message(role="user", content=run.objective),
        ]
        try:
            return await self._loop(state, plan)
        except asyncio.CancelledError:
            state.phase = Phase.CANCELLED
            raise

    @workflow.query
    def state(self) -> AgentState | None:
        return self._state

    async def _prepare(self, run: AgentRun) -> RunPlan:
        try:
            return await workflow.execute_local_activity(
                "run.prepare",
                PrepareRun(run=run, workflow_id=workflow.info().workflow_id),
                result_type=RunPlan,
                start_to_close_timeout=timedelta(seconds=30),
                retry_policy=RetryPolicy(maximum_attempts=5),
                summary=f"prepare agent {run.agent}",
            )
        except ActivityError as err:
            raise ApplicationError(
                _cause(err), type="InvalidInput", non_retryable=True
            ) from None

    async def _loop(self, state: AgentState, plan: RunPlan) -> AgentResult:
        while True:
            reason = budgets.exhausted(plan.budget, state.used, self._elapsed_s(state))
            if reason:
                return self._finish(Phase.BUDGET_EXHAUSTED, error=reason)
            state.step += 1
            state.used.steps += 1
            reply = await self._think(state, plan)
            if not reply.message.tool_calls:
                state.answer = reply.message.content or ""
                return self._finish(Phase.DONE)
            await self._act(state, plan, reply.message.tool_calls)

    async def _think(self, state: AgentState, plan: RunPlan) -> ModelReply:
        state.phase = Phase.THINKING
        request = ModelRequest(
            key=keys.model_key(state.workflow_id, state.step),
            step=state.step,
            transcript_ref=state.transcript_ref,
            new_messages=state.messages[state.unsent :],
            tools_ref=plan.tools_ref,
            settings=plan.model,
        )
        try:
            reply = await workflow.execute_activity(
                "model.call",
                request,
                result_type=ModelReply,
                start_to_close_timeout=timedelta(seconds=plan.model.timeout_s + 30),
                retry_policy=MODEL_RETRY,
                summary=f"step {state.step}: model call",
            )
        except ActivityError as err:
            self._fail(f"step {state.step}: model call failed: {_cause(err)}")
        budgets.charge(state.used, reply.usage, plan.model)
        state.messages.append(reply.message)
        state.transcript_ref = reply.transcript_ref
        state.unsent = len(state.messages)
        return reply

    async def _act(self, state: AgentState, plan: RunPlan, calls: list[ToolCallRequest]) -> None:
        state.phase = Phase.ACTING
        call_ids = keys.unique_call_ids([c.id for c in calls])
        results = await asyncio.gather(
            *(self._call_tool(state, plan, call, cid) for call, cid in zip(calls, call_ids))
        )
        for call, result in zip(calls, results):
            state.messages.append(Message(role="tool", tool_call_id=call.id, content=_tool_message(result)))
        if state.bad_tool_calls > plan.max_bad_tool_calls:
            self._fail(
                f"the model made {state.bad_tool_calls} invalid tool calls "
                f"(limit {plan.max_bad_tool_calls}); last: {state.last_error}"
            )

    async def _call_tool(self, state: AgentState, plan: RunPlan, call: ToolCallRequest, call_id: str) -> ToolResult:
        step = state.step
        key = keys.call_key(state.workflow_id, step, call_id)
        spec = next((t for t in plan.tools if t.name == call.name), None)
        args, problem = _parse_arguments(call.arguments)
        if spec is None:
            problem = f"unknown tool {call.name!r}; available tools: {', '.join(t.name for t in plan.tools)}"
        if problem is not None:
            return self._bad_call(state, ToolResult(ok=False, output=problem, error_type=INVALID_ARGUMENTS))
        try:
            result = await workflow.execute_activity(
                f"tool.{spec.name}",
                ToolInvocation(
                    key=key, workflow_id=state.workflow_id, step=step, call_id=call_id,
                    tool=spec.name, arguments=args, workspace=plan.workspace,
                ),
                result_type=ToolResult,
                start_to_close_timeout=timedelta(seconds=spec.timeout_s),
                retry_policy=RetryPolicy(
                    initial_interval=timedelta(milliseconds=500),
                    maximum_attempts=spec.max_attempts,
                ),
                summary=f"step {step}: tool {spec.name} {_brief(args)}".rstrip(),
            )
        except ActivityError as err:
            self._fail(f"step {step}: tool {spec.name} failed: {_cause(err)}")
        if result.error_type == INVALID_ARGUMENTS:
            self._bad_call(state, result)
        state.used.tool_calls += 1
        state.tool_calls.append(
            ToolCallRecord(step=step, call_id=call_id, tool=spec.name, key=key, arguments=call.arguments, result=result)
        )
        return result

    def _bad_call(self, state: AgentState, result: ToolResult) -> ToolResult:
        state.bad_tool_calls += 1
        state.last_error = result.output
        return result

    def _fail(self, message: str) -> None:
        assert self._state is not None
        self._state.phase = Phase.FAILED
        self._state.last_error = message
        raise ApplicationError(message, type="AgentFailed", non_retryable=True)

    def _finish(self, phase: Phase, error: str | None = None) -> AgentResult:
        state = self._state
        assert state is not None
        state.phase = phase
        if error:
            state.last_error = error
        return AgentResult(
            workflow_id=state.workflow_id, phase=phase, answer=state.answer,
            steps=state.step, used=state.used, last_error=state.last_error,
        )

    def _elapsed_s(self, state: AgentState) -> float:
        started = datetime.fromisoformat(state.started_at) if state.started_at else workflow.now()
        return (workflow.now() - started).total_seconds()


def _parse_arguments(raw: str) -> tuple[dict[str, Any], str | None]:
    try:
        value = json.loads(raw or "{}")
    except ValueError as exc:
        return {}, f"tool arguments are not valid JSON ({exc.msg} at position {exc.pos}); send a JSON object"
    if not isinstance(value, dict):
        return {}, "tool arguments must be a JSON object"
    return value, None


def _tool_message(result: ToolResult) -> str:
    return result.output if result.ok else f"ERROR: {result.output}"


def _brief(args: dict[str, Any]) -> str:
    for name in ("path", "argv", "title", "to"):
        if name in args:
            value = args[name]
            text = " ".join(map(str, value)) if isinstance(value, list) else str(value)
            return text[:80]
    return ""


def _cause(err: BaseException) -> str:
    """The message of the first real failure under Temporal's ActivityError wrapper."""
    while isinstance(err, ActivityError) and err.__cause__ is not None:
        err = err.__cause__
    if isinstance(err, ApplicationError):
        return err.message
    return str(err) or type(err).__name__
