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
from collections.abc import Awaitable
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ChildWorkflowError, FailureError

from ratchet.contracts import (
    AGENT_WORKFLOW,
    AgentResult,
    AgentState,
    Effect,
    EffectClass,
    EffectStatus,
    ErrorType,
    Message,
    OutcomeChoice,
    OutcomeDecision,
    Phase,
    RunPlan,
    SandboxPolicy,
    ToolCallRecord,
    ToolCallRequest,
    ToolInvocation,
    ToolResult,
    ToolSpec,
    valid_unicode,
)
from ratchet.core import keys
from . import approvals, calls, children, events, grants, guardrails, handoffs, hosts, outcomes, quarantine
from .call_order import CallOrder
from .errors import FailRun, cause, raise_if_cancelled
from .hosts import HostLost
from .phases import Phases


TOOL_HEARTBEAT_TIMEOUT = timedelta(seconds=5)
"""For tool activities that declare none (`heartbeat_s`): the tool activity heartbeats at a quarter
of it (activities/tools.py), and the server answers a heartbeat with a cancellation at most every
0.8 of it, so a rollback, a pause or the deadline reaches a running tool within about 4 s."""
CANCEL_SIDE_EFFECT = workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED
CANCEL_READ_ONLY = workflow.ActivityCancellationType.TRY_CANCEL
INTERRUPTED = (
    "interrupted before it finished (the run was paused, rolled back or ran out of time); "
    "it may have taken effect in part: check before calling it again"
)
NOT_RUN = "not run: the run was interrupted (paused, rolled back or out of time) before this call's turn"


async def act(
    state: AgentState, plan: RunPlan, calls: list[ToolCallRequest], phases: Phases, stream: events.RunStream
) -> None:
    """Run one reply's calls (in the order `CallOrder` gives) and record them and their results in
    the reply's order. Every call is answered, also when the step is interrupted
    (workflows/interrupts.py): a conversation with an unanswered call is invalid."""
    phases.enter(state, Phase.ACTING, plan)
    call_ids = keys.unique_call_ids([c.id for c in calls])
    first_record = state.calls.tool_calls.end
    turns = CallOrder(plan, calls)
    try:
        results = await asyncio.gather(
            *(
                turns.run(i, _call_tool(state, plan, call, cid, phases, stream, turns, i))
                for i, (call, cid) in enumerate(zip(calls, call_ids))
            ),
            return_exceptions=True,
        )
    except asyncio.CancelledError:
        _answer_interrupted(state, plan, calls, call_ids, turns, phases)
        state.calls.in_order(first_record, call_ids)
        raise
    state.calls.in_order(first_record, call_ids)
    replies: list[ToolResult] = []
    for outcome in results:
        if isinstance(outcome, BaseException):
            raise outcome
        replies.append(outcome)
    for call, result in zip(calls, replies):
        state.conversation.messages.append(
            Message(
                role="tool",
                tool_call_id=call.id,
                content=_tool_message(result),
                content_ref=result.output_ref,
                is_error=not result.ok,
            )
        )
    if state.calls.bad_tool_calls > plan.max_bad_tool_calls:
        raise FailRun(
            f"the model made {state.calls.bad_tool_calls} invalid tool calls "
            f"(limit {plan.max_bad_tool_calls}); last: {state.last_error}"
        )


def _answer_interrupted(
    state: AgentState,
    plan: RunPlan,
    calls: list[ToolCallRequest],
    call_ids: list[str],
    turns: CallOrder,
    phases: Phases,
) -> None:
    """An interrupted reply: the finished calls answered with their results, the others as
    `Interrupted` (and recorded); no call of it waits for a person any longer."""
    for i, (call, cid) in enumerate(zip(calls, call_ids)):
        result = turns.results.get(i)
        if result is None:
            text = INTERRUPTED if i in turns.started else NOT_RUN
            result = ToolResult(ok=False, error_type=ErrorType.INTERRUPTED, output=text)
            state.calls.record(
                ToolCallRecord(
                    step=state.step,
                    call_id=cid,
                    tool=call.name,
                    key=keys.call_key(state.workflow_id, state.step, cid),
                    arguments=call.arguments,
                    result=result,
                )
            )
        state.conversation.messages.append(
            Message(
                role="tool",
                tool_call_id=call.id,
                content=_tool_message(result),
                content_ref=result.output_ref,
                is_error=not result.ok,
            )
        )
    ids = set(call_ids)
    state.calls.stop_waiting(ids)
    phases.enter(state, Phase.ACTING, plan)


async def _call_tool(
    state: AgentState,
    plan: RunPlan,
    call: ToolCallRequest,
    call_id: str,
    phases: Phases,
    stream: events.RunStream,
    turns: CallOrder,
    index: int,
) -> ToolResult:
    step = state.step
    key = keys.call_key(state.workflow_id, step, call_id)
    spec = plan.offered(call.name)
    args, problem = parse_arguments(call.arguments)
    if spec is None:
        return _bad_call(state, f"unknown tool {call.name!r}; available tools: {', '.join(t.name for t in plan.tools)}")
    if problem is not None:
        return _bad_call(state, problem)
    args, shown, tripped = await guardrails.check_call(state, plan, spec.name, call_id, args, call.arguments)
    if (shadowed := quarantine.answer(state, spec, call, call_id, args)) is not None:  # a shadow must not run it
        return shadowed
    if (refused := await grants.approval(state, plan, spec, call_id, args, tripped, phases)) is not None:
        return refused
    if not await turns.turn(index):
        return ToolResult(ok=False, output="not run: an earlier call of this reply failed")
    events.tool_started(stream, state, call_id, spec.name, shown)
    if spec.kind == "timer":
        result = await _timer(state, args)
    elif spec.kind == "child":
        result = await _delegate(state, plan, spec, key, call_id, args)
    elif spec.kind == "handoff":
        result = await handoffs.hand_over(state, plan, call_id, args)
    elif spec.kind == "plan":
        result = await grants.propose(state, plan, spec, call_id, args, phases)
    else:
        result = await _run_activity_tool(state, plan, spec, key, call_id, args, phases)
    if result.error_type == ErrorType.INVALID_ARGUMENTS:
        count_bad_call(state, result.output)
    state.used.tool_calls += 1
    state.calls.record(
        ToolCallRecord(step=step, call_id=call_id, tool=spec.name, key=key, arguments=shown, result=result)
    )
    return result


async def _run_activity_tool(
    state: AgentState,
    plan: RunPlan,
    spec: ToolSpec,
    key: str,
    call_id: str,
    args: dict[str, Any],
    phases: Phases,
) -> ToolResult:
    step = state.step
    effect = _register_effect(state, spec, step, call_id, key, args)
    decision: OutcomeDecision | None = None
    while True:
        try:
            result = await _execute_tool(state, plan, spec, call_id, args, decision)
            break
        except FailureError as err:  # a local activity's final failure is not wrapped in an ActivityError
            raise_if_cancelled(err)
            if effect is not None:
                effect.status, effect.error = EffectStatus.FAILED, cause(err)
            if outcomes.unknown(err):  # a person (or the timeout policy) decides; workflows/outcomes.py
                decision = await outcomes.ask(state, plan, spec, call_id, key, args, cause(err), phases)
                if decision.choice == OutcomeChoice.SKIP:
                    return outcomes.skipped(spec, decision)
                if decision.choice != OutcomeChoice.FAIL:
                    continue  # retry or assume_done: the activity again, carrying the decision
            if spec.workspace and hosts.host_gone(err):
                raise HostLost(state.workspace.host, f"step {step}: tool {spec.name}") from None
            raise FailRun(f"step {step}: tool {spec.name} failed: {cause(err)}") from None
    if effect is not None and result.error_type == ErrorType.INVALID_ARGUMENTS:
        state.effects.stack.items.remove(effect)  # refused before the tool ran: nothing to undo
    elif effect is not None:
        effect.status = EffectStatus.DONE if result.ok else EffectStatus.FAILED
        effect.undo = result.undo
    return result


async def _execute_tool(
    state: AgentState,
    plan: RunPlan,
    spec: ToolSpec,
    call_id: str,
    args: dict[str, Any],
    decision: OutcomeDecision | None = None,
) -> ToolResult:
    # key, workflow id and tool name come from the activity's own info (not repeated in history)
    invocation = ToolInvocation(
        step=state.step,
        call_id=call_id,
        arguments=args,
        workspace=plan.workspace,
        sandbox=plan.sandbox if spec.workspace else SandboxPolicy(),  # absent from history while the default
        memory_scope=state.run.memory_scope,
        decision=decision.choice.value if decision else None,
        assumed_output=decision.result if decision else None,
    )
    if spec.mcp:  # one activity type per MCP server: it needs the tool's name and the run's pinned tool list
        invocation.tool, invocation.catalog = spec.name, plan.mcp_ref or ""
    retry = RetryPolicy(initial_interval=timedelta(milliseconds=500), maximum_attempts=spec.max_attempts)
    summary = f"step {state.step}: tool {spec.name} {_brief(args)}".rstrip()
    missed = False
    if spec.local:  # fast and read-only (see ToolSpec.local): no server round trip
        local = invocation.model_copy(update={"host": state.workspace.host}) if spec.workspace else invocation
        try:
            return await workflow.execute_local_activity(
                spec.activity_type,
                local,
                result_type=ToolResult,
                start_to_close_timeout=timedelta(seconds=spec.timeout_s),
                retry_policy=retry,
                summary=summary,
            )
        except FailureError as err:
            if not (spec.workspace and hosts.elsewhere(err)):
                raise
            missed = True  # this worker's host does not hold the workspace (it did not act): to the host's queue

    def schedule(host: str | None, options: hosts.HostOptions) -> Awaitable[ToolResult]:
        return workflow.execute_activity(
            spec.activity_type,
            invocation.model_copy(update={"host": host}) if host else invocation,
            result_type=ToolResult,
            start_to_close_timeout=timedelta(seconds=spec.timeout_s),
            heartbeat_timeout=timedelta(seconds=spec.heartbeat_s) if spec.heartbeat_s else TOOL_HEARTBEAT_TIMEOUT,
            # an interrupted side effect is waited for until it has stopped: its undo must not run beside it
            cancellation_type=CANCEL_READ_ONLY if spec.effect == EffectClass.READ_ONLY else CANCEL_SIDE_EFFECT,
            retry_policy=retry,
            summary=summary,
            priority=calls.priority(),
            **options,
        )

    if missed:
        return await schedule(None, hosts.on_host(state.workspace.host, plan))
    if spec.workspace:  # on the workspace's host
        return await hosts.on_workspace_host(state, plan, schedule)
    return await schedule(None, hosts.HostOptions())


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
            AGENT_WORKFLOW,
            child_run,
            id=children.child_id(key),
            result_type=AgentResult,
            task_queue=workflow.info().task_queue,
            priority=calls.priority(),
        )
    except ChildWorkflowError as err:
        raise_if_cancelled(err)
        effect.status, effect.error = EffectStatus.FAILED, cause(err)
        return ToolResult(
            ok=False,
            error_type=ErrorType.SUB_AGENT_FAILED,
            output=f"sub-agent {args.get('agent')} failed: {cause(err)}",
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
        tool=spec.name,
        step=step,
        call_id=call_id,
        key=key,
        arguments=args,
        effect=spec.effect,
        workspace=spec.workspace,
        turn=state.session.turn_number,
    )
    state.effects.stack.append(effect)
    return effect


def _bad_call(state: AgentState, problem: str) -> ToolResult:
    """A call the model got wrong, before anything ran: it goes back to the model."""
    count_bad_call(state, problem)
    return ToolResult(ok=False, output=problem, error_type=ErrorType.INVALID_ARGUMENTS)


def count_bad_call(state: AgentState, problem: str) -> None:
    state.calls.bad_tool_calls += 1
    state.last_error = problem


def parse_arguments(raw: str) -> tuple[dict[str, Any], str | None]:
    """The model's arguments as a JSON object, or why they are not one (said to the model)."""
    try:
        value = json.loads(raw or "{}")
    except json.JSONDecodeError as exc:
        return {}, f"tool arguments are not valid JSON ({exc.msg} at position {exc.pos}); send a JSON object"
    except ValueError as exc:  # what json.loads raises past its parser, e.g. an integer of over 4300 digits
        return {}, f"tool arguments are not valid JSON ({exc}); send a JSON object"
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
            return (" ".join(map(str, value)) if isinstance(value, list) else str(value))[:80]
    return ""
