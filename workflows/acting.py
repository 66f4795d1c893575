"""ACT: the tool calls of one model reply (deterministic, no I/O).

Each call is parsed and checked against the plan, may wait for a person's approval, and then runs
as what its `ToolSpec.kind` says: an activity `tool.<name>` (a local activity for fast read-only
tools; a workspace tool on the host holding the workspace, workflows/hosts.py), a durable timer
(`wait`), or a child `AgentWorkflow` (`delegate`). Side-effecting calls push their `Effect` before
they are scheduled: a call that times out may still have acted. A call the model got wrong goes
back to it as an `InvalidArguments` tool result.
"""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ChildWorkflowError, FailureError

from ratchet.contracts import (
    AGENT_WORKFLOW, AgentResult, AgentState, Decision, Effect, EffectClass, EffectStatus, ErrorType, Message,
    PendingApproval, Phase, RunPlan, SandboxPolicy, ToolCallRecord, ToolCallRequest, ToolInvocation, ToolResult, ToolSpec,
    valid_unicode,
)
from ratchet.core import keys
from ratchet.workflows import approvals, children, hosts
from ratchet.workflows.errors import RunFailed, cause, raise_if_cancelled
from ratchet.workflows.hosts import HostLost
from ratchet.workflows.visibility import Visibility


async def act(state: AgentState, plan: RunPlan, calls: list[ToolCallRequest], visibility: Visibility) -> None:
    """Run one reply's calls concurrently; record them and their results in the reply's order."""
    state.phase = Phase.ACTING
    call_ids = keys.unique_call_ids([c.id for c in calls])
    first_record = len(state.tool_calls)
    outcomes = await asyncio.gather(
        *(_call_tool(state, plan, call, cid, visibility) for call, cid in zip(calls, call_ids)), return_exceptions=True
    )
    # The calls ran concurrently and were recorded as they finished; keep the reply's order.
    position = {cid: i for i, cid in enumerate(call_ids)}
    state.tool_calls[first_record:] = sorted(state.tool_calls[first_record:], key=lambda r: position[r.call_id])
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise outcome
    for call, result in zip(calls, outcomes):
        state.messages.append(
            Message(role="tool", tool_call_id=call.id, content=_tool_message(result), content_ref=result.output_ref)
        )
    if state.bad_tool_calls > plan.max_bad_tool_calls:
        raise RunFailed(
            f"the model made {state.bad_tool_calls} invalid tool calls "
            f"(limit {plan.max_bad_tool_calls}); last: {state.last_error}"
        )


async def _call_tool(
    state: AgentState, plan: RunPlan, call: ToolCallRequest, call_id: str, visibility: Visibility
) -> ToolResult:
    step = state.step
    key = keys.call_key(state.workflow_id, step, call_id)
    spec = next((t for t in plan.tools if t.name == call.name), None)
    args, problem = parse_arguments(call.arguments)
    if spec is None:
        problem = f"unknown tool {call.name!r}; available tools: {', '.join(t.name for t in plan.tools)}"
    if problem is not None:
        return _bad_call(state, problem)
    reason = approvals.needs_approval(plan, spec, args)
    if reason is not None:
        decision = await _await_approval(state, plan, spec, call_id, args, reason, visibility)
        if not decision.approved:
            return ToolResult(ok=False, error_type=ErrorType.REJECTED, output=f"a person rejected this call: {decision.reason}")
    if spec.kind == "timer":
        result = await _timer(state, args)
    elif spec.kind == "child":
        result = await _delegate(state, plan, spec, key, call_id, args)
    else:
        result = await _run_activity_tool(state, plan, spec, key, call_id, args)
    if result.error_type == ErrorType.INVALID_ARGUMENTS:
        _count_bad_call(state, result.output)
    state.used.tool_calls += 1
    state.tool_calls.append(
        ToolCallRecord(step=step, call_id=call_id, tool=spec.name, key=key, arguments=call.arguments, result=result)
    )
    return result


async def _run_activity_tool(
    state: AgentState, plan: RunPlan, spec: ToolSpec, key: str, call_id: str, args: dict[str, Any]
) -> ToolResult:
    step = state.step
    effect = _register_effect(state, spec, step, call_id, key, args)
    try:
        result = await _execute_tool(state, plan, spec, call_id, args)
    except FailureError as err:  # a local activity's final failure is not wrapped in an ActivityError
        raise_if_cancelled(err)
        if effect is not None:
            effect.status, effect.error = EffectStatus.FAILED, cause(err)
        if spec.workspace and hosts.host_gone(err):
            raise HostLost(state.workspace_host, f"step {step}: tool {spec.name}") from None
        raise RunFailed(f"step {step}: tool {spec.name} failed: {cause(err)}") from None
    if effect is not None:
        effect.status = EffectStatus.DONE if result.ok else EffectStatus.FAILED
        effect.undo = result.undo
    return result


async def _execute_tool(state: AgentState, plan: RunPlan, spec: ToolSpec, call_id: str, args: dict[str, Any]) -> ToolResult:
    # key, workflow id and tool name come from the activity's own info (not repeated in history)
    invocation = ToolInvocation(
        step=state.step, call_id=call_id, arguments=args, workspace=plan.workspace,
        sandbox=plan.sandbox if spec.workspace else SandboxPolicy(),  # absent from history while the default
    )
    retry = RetryPolicy(initial_interval=timedelta(milliseconds=500), maximum_attempts=spec.max_attempts)
    summary = f"step {state.step}: tool {spec.name} {_brief(args)}".rstrip()
    if spec.local:  # fast and read-only (see ToolSpec.local): no server round trip
        return await workflow.execute_local_activity(
            f"tool.{spec.name}", invocation, result_type=ToolResult,
            start_to_close_timeout=timedelta(seconds=spec.timeout_s), retry_policy=retry, summary=summary,
        )
    return await workflow.execute_activity(
        f"tool.{spec.name}", invocation, result_type=ToolResult,
        start_to_close_timeout=timedelta(seconds=spec.timeout_s),
        heartbeat_timeout=timedelta(seconds=spec.heartbeat_s) if spec.heartbeat_s else None,
        retry_policy=retry, summary=summary,
        **hosts.on_host(state.workspace_host if spec.workspace else None, plan),  # on the workspace's host
    )


async def _await_approval(
    state: AgentState, plan: RunPlan, spec: ToolSpec, call_id: str, args: dict[str, Any], reason: str,
    visibility: Visibility,
) -> Decision:
    state.pending_approvals.append(PendingApproval(
        call_id=call_id, tool=spec.name, step=state.step, arguments=args,
        requested_at=workflow.now().isoformat(), reason=reason,
    ))
    state.phase = Phase.AWAITING_APPROVAL
    visibility.publish(state, plan)
    timeout = timedelta(seconds=plan.approval_timeout_s) if plan.approval_timeout_s else None
    try:
        await workflow.wait_condition(lambda: call_id in state.decisions, timeout=timeout)
    except asyncio.TimeoutError:
        state.decisions[call_id] = approvals.on_timeout(plan)
    state.pending_approvals = [p for p in state.pending_approvals if p.call_id != call_id]
    if not state.pending_approvals:
        state.phase = Phase.ACTING
    visibility.publish(state, plan)
    decision = state.decisions[call_id]
    if decision.by == "timeout" and plan.on_approval_timeout == "fail":
        raise RunFailed(f"step {state.step}: approval for {spec.name} timed out")
    return decision


async def _timer(state: AgentState, args: dict[str, Any]) -> ToolResult:
    seconds, problem = approvals.timer_seconds(args, workflow.now())
    if problem is not None:
        return _bad_call(state, problem)
    await workflow.sleep(timedelta(seconds=seconds), summary=f"step {state.step}: wait {seconds:.0f}s")
    return ToolResult(ok=True, output=f"waited {seconds:.0f}s; it is now {workflow.now().isoformat()}")


async def _delegate(
    state: AgentState, plan: RunPlan, spec: ToolSpec, key: str, call_id: str, args: dict[str, Any]
) -> ToolResult:
    """A child AgentWorkflow with the parent's remaining budget; its spend is charged here."""
    child_run, problem = children.child_run(state, plan, args)
    if problem is not None:
        return _bad_call(state, problem)
    effect = _register_effect(state, spec, state.step, call_id, key, args)
    assert effect is not None
    try:
        child: AgentResult = await workflow.execute_child_workflow(
            AGENT_WORKFLOW, child_run, id=children.child_id(key), result_type=AgentResult,
            task_queue=workflow.info().task_queue,
        )
    except ChildWorkflowError as err:
        raise_if_cancelled(err)
        effect.status, effect.error = EffectStatus.FAILED, cause(err)
        return ToolResult(
            ok=False, error_type=ErrorType.SUB_AGENT_FAILED, output=f"sub-agent {args.get('agent')} failed: {cause(err)}"
        )
    children.charge(state.used, child.used)
    effect.status = EffectStatus.DONE
    effect.undo = children.undo_info(child)
    return ToolResult(ok=child.phase == Phase.DONE, output=children.summary(child), undo=effect.undo)


def _register_effect(
    state: AgentState, spec: ToolSpec, step: int, call_id: str, key: str, args: dict[str, Any]
) -> Effect | None:
    """Pushed before the call is scheduled: a call that times out may still have acted."""
    if spec.effect == EffectClass.READ_ONLY:
        return None
    effect = Effect(
        tool=spec.name, step=step, call_id=call_id, key=key, arguments=args, effect=spec.effect, workspace=spec.workspace,
    )
    state.effects.append(effect)
    return effect


def _bad_call(state: AgentState, problem: str) -> ToolResult:
    """A call the model got wrong, before anything ran: it goes back to the model."""
    _count_bad_call(state, problem)
    return ToolResult(ok=False, output=problem, error_type=ErrorType.INVALID_ARGUMENTS)


def _count_bad_call(state: AgentState, problem: str) -> None:
    state.bad_tool_calls += 1
    state.last_error = problem


def parse_arguments(raw: str) -> tuple[dict[str, Any], str | None]:
    """The model's arguments as a JSON object, or why they are not one (said to the model)."""
    try:
        value = json.loads(raw or "{}")
    except ValueError as exc:
        return {}, f"tool arguments are not valid JSON ({exc.msg} at position {exc.pos}); send a JSON object"
    if not isinstance(value, dict):
        return {}, "tool arguments must be a JSON object"
    if not valid_unicode(json.dumps(value, ensure_ascii=False)):
        return {}, "tool arguments contain invalid Unicode (a lone surrogate); send valid UTF-8 text"
    return value, None


def _tool_message(result: ToolResult) -> str:
    return result.output if result.ok else f"ERROR: {result.output}"


def _brief(args: dict[str, Any]) -> str:
    """The argument a person recognises a call by, for the activity's summary in the Web UI."""
    for name in ("path", "argv", "title", "to"):
        if name in args:
            value = args[name]
            text = " ".join(map(str, value)) if isinstance(value, list) else str(value)
            return text[:80]
    return ""
