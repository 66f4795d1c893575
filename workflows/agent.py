"""AgentWorkflow: the agent's explicit state machine.

    STARTING -> (THINKING -> ACTING -> [verify -> checkpoint])* -> DONE | BUDGET_EXHAUSTED
    on failure or cancellation: ROLLING_BACK per the failure policy -> FAILED | CANCELLED |
    COMPENSATION_FAILED; a `rollback` update with then=stop ends in ROLLED_BACK.

Deterministic and free of I/O: every model call, tool call, undo and verification is an
activity; all state is an `AgentState`, queryable at any moment.
"""

from __future__ import annotations

import asyncio
import json
from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RawValue, RetryPolicy, SearchAttributeKey, SearchAttributePair, TypedSearchAttributes
from temporalio.exceptions import (
    ActivityError, ApplicationError, ChildWorkflowError, FailureError, is_cancelled_exception,
)

with workflow.unsafe.imports_passed_through():
    # Contracts and pure helpers only: pydantic and the standard library.
    from ratchet.core import budget as budgets
    from ratchet.core import keys
    from ratchet.contracts import (
        AgentResult, AgentRun, AgentState, ApproveRequest, Checkpoint, Continuation, Decision, Effect,
        EffectClass, EffectStatus, FailurePolicy, LoadCheckpoint, Message, ModelReply, ModelRequest,
        PendingApproval, Phase, PrepareRun, RejectRequest, RollbackPlanItem, RollbackReport,
        RollbackRequest, RunPlan, ToolCallRecord, ToolCallRequest, ToolInvocation, ToolResult, ToolSpec,
        Transcript, TranscriptPage, VerifyRequest, VerifyResult, scrub_text, valid_unicode,
    )
    from ratchet.workflows import approvals, children, handover, saga
    from ratchet.workflows.input import parse_run

INVALID_ARGUMENTS = "InvalidArguments"
MODEL_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1), backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=60), maximum_attempts=8,
)


HEARTBEAT_TIMEOUT = timedelta(seconds=20)
"""model.call, checkpoint.verify and undo.* heartbeat every 5 s: a dead worker is noticed in 20 s."""
SA_AGENT = SearchAttributeKey.for_keyword("RatchetAgent")
SA_PHASE = SearchAttributeKey.for_keyword("RatchetPhase")
SA_APPROVAL = SearchAttributeKey.for_bool("RatchetAwaitingApproval")


class RunFailed(Exception):
    """A failure that ends the run after its failure policy has been applied."""


# Outside the SDK's sandbox (bench/results/latest.md): the sandbox re-imported this module for every
# run and ran code via exec for every payload: 5.6 ms worker CPU per step, 258 KiB per cached run
# (99 KiB without), half the replay speed; and a long-lived worker picked up half-edited files from
# disk. Determinism is guarded instead by review (no I/O, clocks or randomness here; workflow.now,
# timers and activities only), by every test worker replaying each task (max_cached_workflows=0)
# and by the replay gate over tests/histories before every deploy.
@workflow.defn(name="AgentWorkflow", sandboxed=False)
class AgentWorkflow:
    def __init__(self) -> None:
        self._state: AgentState | None = None
        self._rollbacks: list[tuple[int, RollbackRequest]] = []
        self._rollback_done: dict[int, RollbackReport] = {}
        self._next_request = 0
        self._published: tuple | None = None
        self._early_inbox: list[str] = []
        self._early_paused: bool | None = None
        """Signals that arrive before the state exists (same first task as the start) wait here."""

    @workflow.run
    async def run(self, raw: RawValue = None) -> AgentResult:  # type: ignore[assignment]
        parsed = parse_run(raw)
        if isinstance(parsed, Continuation):
            self._state = state = parsed.continuation
            state.continued += 1
            self._take_early_signals(state)
        else:
            self._state = state = AgentState(
                workflow_id=workflow.info().workflow_id, run=parsed, started_at=workflow.now().isoformat()
            )
            self._take_early_signals(state)
            state.plan = plan = await self._prepare(parsed)
            state.messages = [
                Message(role="system", content=plan.system_prompt), Message(role="user", content=parsed.objective)
            ]
        plan = state.plan
        assert plan is not None
        try:
            if not isinstance(parsed, Continuation) and parsed.resume_from is not None:
                await self._fork(state, plan)
            self._publish(state, plan)
            return await self._loop(state, plan)
        except RunFailed as failure:
            await self._apply_failure_policy(state, state.plan, str(failure))
            phase = Phase.COMPENSATION_FAILED if state.phase == Phase.COMPENSATION_FAILED else Phase.FAILED
            self._finish(phase, error=str(failure))
            raise ApplicationError(self._failure_message(str(failure)), type="AgentFailed", non_retryable=True) from None
        except asyncio.CancelledError:
            await self._apply_failure_policy(state, state.plan, "cancelled")
            state.phase = Phase.CANCELLED if state.phase != Phase.COMPENSATION_FAILED else state.phase
            raise

    def _take_early_signals(self, state: AgentState) -> None:
        """Signals of the first task, before the state existed; later ones go to the state directly
        (so a resume during run.prepare is not undone by an earlier pause, and messages keep order)."""
        state.inbox[:0] = self._early_inbox
        if self._early_paused is not None:
            state.paused = self._early_paused

    # --- queries and updates -------------------------------------------------------------

    @workflow.query
    def state(self) -> AgentState | None:
        return self._state

    @workflow.query
    def transcript(self, page: TranscriptPage) -> Transcript:
        """The conversation, paged (`state` has everything; this stays small)."""
        state = self._require_state()
        offset = max(page.offset, state.messages_base)  # earlier ones: in the transcript artifact
        start = offset - state.messages_base
        return Transcript(
            total=state.message_count, offset=offset,
            messages=state.messages[start : start + page.limit],
        )

    @workflow.signal
    def send_message(self, text: str) -> None:
        """A user message, added to the conversation at the next step boundary."""
        if not isinstance(text, str) or not text.strip():
            return
        text = scrub_text(text[:100_000])
        (self._state.inbox if self._state is not None else self._early_inbox).append(text)

    @workflow.signal
    def pause(self) -> None:
        self._set_paused(True)

    @workflow.signal
    def resume(self) -> None:
        self._set_paused(False)

    def _set_paused(self, paused: bool) -> None:
        if self._state is None:
            self._early_paused = paused
        else:
            self._state.paused = paused

    @workflow.update
    def approve(self, request: ApproveRequest) -> str:
        self._require_state().decisions[request.call_id] = Decision(approved=True)
        return f"approved {request.call_id}"

    @approve.validator
    def _validate_approve(self, request: ApproveRequest) -> None:
        approvals.validate_decision(self._require_state(), request.call_id)

    @workflow.update
    def reject(self, request: RejectRequest) -> str:
        self._require_state().decisions[request.call_id] = Decision(approved=False, reason=request.reason)
        return f"rejected {request.call_id}"

    @reject.validator
    def _validate_reject(self, request: RejectRequest) -> None:
        approvals.validate_decision(self._require_state(), request.call_id)

    @workflow.query
    def rollback_plan(self, checkpoint_id: str) -> list[RollbackPlanItem]:
        """Dry run: the effects a rollback to `checkpoint_id` would undo, newest first."""
        state = self._require_state()
        return saga.rollback_plan(state, state.plan, self._boundary(checkpoint_id))

    @workflow.update
    async def rollback(self, request: RollbackRequest) -> RollbackReport:
        """Undo every effect above the checkpoint (newest first), restore the conversation to it,
        then continue or stop as asked. Runs at the next step boundary."""
        request_id = self._next_request
        self._next_request += 1
        self._rollbacks.append((request_id, request))
        await workflow.wait_condition(lambda: request_id in self._rollback_done)
        return self._rollback_done.pop(request_id)

    @rollback.validator
    def _validate_rollback(self, request: RollbackRequest) -> None:
        state = self._require_state()
        if state.phase.terminal:
            raise ValueError(f"run is {state.phase}; nothing to roll back")
        self._boundary(request.checkpoint_id)

    # --- the loop ------------------------------------------------------------------------

    async def _prepare(self, run: AgentRun) -> RunPlan:
        try:
            # A regular activity, not a local one: a local activity pending while the run is
            # evicted from the worker cache stalls the workflow task until it times out.
            return await workflow.execute_activity(
                "run.prepare",
                PrepareRun(run=run, workflow_id=workflow.info().workflow_id, chain=workflow.info().first_execution_run_id),
                result_type=RunPlan, start_to_close_timeout=timedelta(seconds=30),
                retry_policy=RetryPolicy(maximum_attempts=5), summary=f"prepare agent {run.agent}",
            )
        except ActivityError as err:
            _raise_if_cancelled(err)
            raise ApplicationError(_cause(err), type="InvalidInput", non_retryable=True) from None

    async def _fork(self, state: AgentState, plan: RunPlan) -> None:
        source = state.run.resume_from
        assert source is not None
        try:
            checkpoint = await workflow.execute_activity(
                "checkpoint.fork",
                LoadCheckpoint(workflow_id=source.workflow_id, checkpoint_id=source.checkpoint_id, workspace=plan.workspace),
                result_type=Checkpoint, start_to_close_timeout=timedelta(minutes=5),
                retry_policy=RetryPolicy(maximum_attempts=5),
                summary=f"fork from {source.workflow_id} {source.checkpoint_id}",
            )
        except ActivityError as err:
            _raise_if_cancelled(err)
            raise ApplicationError(_cause(err), type="InvalidInput", non_retryable=True) from None
        objective = Message(role="user", content=state.run.objective, pinned=True)  # the window keeps it
        state.messages = list(checkpoint.messages or []) + [objective]
        state.messages_base = checkpoint.messages_base
        state.transcript = checkpoint.transcript
        state.unsent = checkpoint.unsent
        # a rollback to where the fork began keeps the fork's objective
        state.checkpoints = [checkpoint.model_copy(update={
            "messages": None, "effects_len": 0, "messages_len": checkpoint.messages_len + 1,
        })]

    async def _loop(self, state: AgentState, plan: RunPlan) -> AgentResult:
        while True:
            if await self._serve_rollbacks(state, plan):
                return self._finish(Phase.ROLLED_BACK)
            if state.paused:
                await self._wait_while_paused(state, plan)
                continue
            self._deliver_inbox(state)
            if self._should_continue_as_new(plan):
                await workflow.wait_condition(workflow.all_handlers_finished)
                self._deliver_inbox(state)
                workflow.continue_as_new(Continuation(continuation=handover.trimmed(state)))
            reason = budgets.exhausted(plan.budget, state.used, self._elapsed_s(state))
            if reason:
                return self._finish(Phase.BUDGET_EXHAUSTED, error=reason)
            state.step += 1
            state.used.steps += 1
            reply = await self._think(state, plan)
            if not reply.message.tool_calls:
                state.answer = reply.message.content or ""
                return self._finish(Phase.DONE)
            effects_before = len(state.effects)
            await self._act(state, plan, reply.message.tool_calls)
            changed = any(e.effect == EffectClass.COMPENSABLE for e in state.effects[effects_before:])
            if plan.verifier is not None and changed:
                await self._verify(state, plan)

    async def _wait_while_paused(self, state: AgentState, plan: RunPlan) -> None:
        """Costs nothing but history while paused; a rollback request is served while paused."""
        running_phase, state.phase = state.phase, Phase.PAUSED
        self._publish(state, plan)
        await workflow.wait_condition(lambda: not state.paused or bool(self._rollbacks))
        state.phase = running_phase
        self._publish(state, plan)

    def _deliver_inbox(self, state: AgentState) -> None:
        for text in state.inbox:
            state.messages.append(Message(role="user", content=text))
        state.inbox.clear()

    def _should_continue_as_new(self, plan: RunPlan) -> bool:
        info = workflow.info()
        return info.is_continue_as_new_suggested() or info.get_current_history_length() >= plan.continue_as_new_events

    def _publish(self, state: AgentState, plan: RunPlan) -> None:
        """Search attributes for `temporal workflow list --query 'RatchetPhase="AWAITING_APPROVAL"'`."""
        if not plan.search_attributes:
            return
        phase = state.phase if state.phase in (Phase.AWAITING_APPROVAL, Phase.PAUSED) or state.phase.terminal else "RUNNING"
        wanted = (state.run.agent, str(phase), bool(state.pending_approvals))
        if wanted == self._published:
            return
        self._published = wanted
        workflow.upsert_search_attributes(TypedSearchAttributes([
            SearchAttributePair(SA_AGENT, wanted[0]), SearchAttributePair(SA_PHASE, wanted[1]),
            SearchAttributePair(SA_APPROVAL, wanted[2]),
        ]))

    async def _think(self, state: AgentState, plan: RunPlan) -> ModelReply:
        state.phase = Phase.THINKING
        unsent = state.messages[state.unsent - state.messages_base :]
        request = ModelRequest(step=state.step, call_ref=plan.call_ref, transcript=state.transcript, new_messages=unsent)
        try:
            reply = await workflow.execute_activity(
                "model.call", request, result_type=ModelReply,
                start_to_close_timeout=timedelta(seconds=plan.model.timeout_s + 30),
                retry_policy=MODEL_RETRY, summary=f"step {state.step}: model call",
                heartbeat_timeout=HEARTBEAT_TIMEOUT,
            )
        except ActivityError as err:
            _raise_if_cancelled(err)
            raise RunFailed(f"step {state.step}: model call failed: {_cause(err)}") from None
        budgets.charge(state.used, reply.usage, plan.model)
        state.messages.append(reply.message)
        state.transcript = reply.transcript
        state.unsent = state.message_count
        return reply

    async def _act(self, state: AgentState, plan: RunPlan, calls: list[ToolCallRequest]) -> None:
        state.phase = Phase.ACTING
        call_ids = keys.unique_call_ids([c.id for c in calls])
        first_record = len(state.tool_calls)
        outcomes = await asyncio.gather(
            *(self._call_tool(state, plan, call, cid) for call, cid in zip(calls, call_ids)), return_exceptions=True
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

    async def _call_tool(self, state: AgentState, plan: RunPlan, call: ToolCallRequest, call_id: str) -> ToolResult:
        step = state.step
        key = keys.call_key(state.workflow_id, step, call_id)
        spec = next((t for t in plan.tools if t.name == call.name), None)
        args, problem = _parse_arguments(call.arguments)
        if spec is None:
            problem = f"unknown tool {call.name!r}; available tools: {', '.join(t.name for t in plan.tools)}"
        if problem is not None:
            return self._bad_call(state, ToolResult(ok=False, output=problem, error_type=INVALID_ARGUMENTS))
        reason = approvals.needs_approval(plan, spec, args)
        if reason is not None:
            decision = await self._await_approval(state, plan, spec, call_id, args, reason)
            if not decision.approved:
                return ToolResult(ok=False, error_type="Rejected", output=f"a person rejected this call: {decision.reason}")
        if spec.kind == "timer":
            result = await self._timer(state, plan, args)
        elif spec.kind == "child":
            result = await self._delegate(state, plan, spec, key, call_id, args)
        else:
            result = await self._run_activity_tool(state, plan, spec, key, call_id, args)
        if result.error_type == INVALID_ARGUMENTS:
            self._bad_call(state, result)
        state.used.tool_calls += 1
        state.tool_calls.append(
            ToolCallRecord(step=step, call_id=call_id, tool=spec.name, key=key, arguments=call.arguments, result=result)
        )
        return result

    async def _run_activity_tool(
        self, state: AgentState, plan: RunPlan, spec: ToolSpec, key: str, call_id: str, args: dict[str, Any]
    ) -> ToolResult:
        step = state.step
        effect = self._register_effect(state, spec, step, call_id, key, args)
        try:
            result = await self._execute_tool(state, plan, spec, key, call_id, args)
        except FailureError as err:  # a local activity's final failure is not wrapped in an ActivityError
            _raise_if_cancelled(err)
            if effect is not None:
                effect.status, effect.error = EffectStatus.FAILED, _cause(err)
            raise RunFailed(f"step {step}: tool {spec.name} failed: {_cause(err)}") from None
        if effect is not None:
            effect.status = EffectStatus.DONE if result.ok else EffectStatus.FAILED
            effect.undo = result.undo
        return result

    async def _await_approval(
        self, state: AgentState, plan: RunPlan, spec: ToolSpec, call_id: str, args: dict[str, Any], reason: str
    ) -> Decision:
        state.pending_approvals.append(PendingApproval(
            call_id=call_id, tool=spec.name, step=state.step, arguments=args,
            requested_at=workflow.now().isoformat(), reason=reason,
        ))
        state.phase = Phase.AWAITING_APPROVAL
        self._publish(state, plan)
        timeout = timedelta(seconds=plan.approval_timeout_s) if plan.approval_timeout_s else None
        try:
            await workflow.wait_condition(lambda: call_id in state.decisions, timeout=timeout)
        except asyncio.TimeoutError:
            state.decisions[call_id] = approvals.on_timeout(plan)
        state.pending_approvals = [p for p in state.pending_approvals if p.call_id != call_id]
        if not state.pending_approvals:
            state.phase = Phase.ACTING
        self._publish(state, plan)
        decision = state.decisions[call_id]
        if decision.by == "timeout" and plan.on_approval_timeout == "fail":
            raise RunFailed(f"step {state.step}: approval for {spec.name} timed out")
        return decision

    async def _timer(self, state: AgentState, plan: RunPlan, args: dict[str, Any]) -> ToolResult:
        seconds, problem = approvals.timer_seconds(args, workflow.now())
        if problem is not None:
            return self._bad_call(state, ToolResult(ok=False, output=problem, error_type=INVALID_ARGUMENTS))
        await workflow.sleep(timedelta(seconds=seconds), summary=f"step {state.step}: wait {seconds:.0f}s")
        return ToolResult(ok=True, output=f"waited {seconds:.0f}s; it is now {workflow.now().isoformat()}")

    async def _delegate(
        self, state: AgentState, plan: RunPlan, spec: ToolSpec, key: str, call_id: str, args: dict[str, Any]
    ) -> ToolResult:
        """A child AgentWorkflow with the parent's remaining budget; its spend is charged here."""
        child_run, problem = children.child_run(state, plan, args)
        if problem is not None:
            return self._bad_call(state, ToolResult(ok=False, output=problem, error_type=INVALID_ARGUMENTS))
        effect = self._register_effect(state, spec, state.step, call_id, key, args)
        assert effect is not None
        try:
            child: AgentResult = await workflow.execute_child_workflow(
                "AgentWorkflow", child_run, id=children.child_id(key), result_type=AgentResult,
                task_queue=workflow.info().task_queue,
            )
        except ChildWorkflowError as err:
            _raise_if_cancelled(err)
            effect.status, effect.error = EffectStatus.FAILED, _cause(err)
            return ToolResult(ok=False, error_type="SubAgentFailed", output=f"sub-agent {args.get('agent')} failed: {_cause(err)}")
        children.charge(state.used, child.used)
        effect.status = EffectStatus.DONE
        effect.undo = children.undo_info(child)
        return ToolResult(ok=child.phase == Phase.DONE, output=children.summary(child), undo=effect.undo)

    def _register_effect(
        self, state: AgentState, spec: ToolSpec, step: int, call_id: str, key: str, args: dict[str, Any]
    ) -> Effect | None:
        """Pushed before the call is scheduled: a call that times out may still have acted."""
        if spec.effect == EffectClass.READ_ONLY:
            return None
        effect = Effect(tool=spec.name, step=step, call_id=call_id, key=key, arguments=args, effect=spec.effect)
        state.effects.append(effect)
        return effect

    async def _execute_tool(
        self, state: AgentState, plan: RunPlan, spec: ToolSpec, key: str, call_id: str, args: dict[str, Any]
    ) -> ToolResult:
        # key, workflow id and tool name come from the activity's own info (not repeated in history)
        invocation = ToolInvocation(step=state.step, call_id=call_id, arguments=args, workspace=plan.workspace)
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
        )

    # --- verification and checkpoints ----------------------------------------------------

    async def _verify(self, state: AgentState, plan: RunPlan) -> None:
        """Run the verifier; pass -> checkpoint; fail -> evidence to the model (and revert)."""
        boundary = state.checkpoints[-1].effects_len if state.checkpoints else 0
        try:
            result = await self._run_verifier(state, plan, boundary)
        except ActivityError as err:
            _raise_if_cancelled(err)
            raise RunFailed(f"step {state.step}: verification could not run: {_cause(err)}") from None
        evidence = result.evidence
        if evidence.passed:
            state.checkpoints.append(_checkpoint(state, result))
            return
        note = f"Verification failed: `{' '.join(evidence.argv)}` exited {evidence.exit_code}.\n{evidence.output}"
        if plan.revert_on_failed_verification:
            last = state.checkpoints[-1].id if state.checkpoints else None
            report = await self._rollback_effects(state, plan, boundary, last, "verification failed")
            if not report.clean:
                raise RunFailed(f"reverting a failed step did not complete: {report.errors}")
            note += f"\nYour changes since {last or 'the start'} were reverted ({len(report.undone)} undone)."
        state.messages.append(Message(role="user", content=note))

    async def _run_verifier(self, state: AgentState, plan: RunPlan, boundary: int) -> VerifyResult:
        assert plan.verifier is not None
        return await workflow.execute_activity(
            "checkpoint.verify",
            VerifyRequest(
                key=keys.call_key(state.workflow_id, state.step, "verify"), workflow_id=state.workflow_id,
                workspace=plan.workspace, verifier=plan.verifier, changed=_changed_files(state.effects[boundary:]),
            ),
            result_type=VerifyResult,
            start_to_close_timeout=timedelta(seconds=plan.verifier.timeout_s + 60),
            retry_policy=RetryPolicy(maximum_attempts=3),
            heartbeat_timeout=HEARTBEAT_TIMEOUT,
            summary=f"step {state.step}: verify {' '.join(plan.verifier.argv)}"[:200],
        )

    # --- rollback and failure policy -------------------------------------------------------

    async def _serve_rollbacks(self, state: AgentState, plan: RunPlan) -> bool:
        """Run requested rollbacks at a step boundary; True if one asked the run to stop."""
        stop = False
        while self._rollbacks:
            request_id, request = self._rollbacks.pop(0)
            report = await self._rollback_to(state, plan, request.checkpoint_id, "rollback requested")
            self._rollback_done[request_id] = report
            if not report.clean:
                raise RunFailed(f"rollback to {request.checkpoint_id} did not complete")
            stop = stop or request.then == "stop"
        return stop

    async def _rollback_to(self, state: AgentState, plan: RunPlan, checkpoint_id: str | None, reason: str) -> RollbackReport:
        boundary = self._boundary(checkpoint_id) if checkpoint_id else 0
        report = await self._rollback_effects(state, plan, boundary, checkpoint_id, reason)
        if report.clean:
            checkpoint = next((c for c in state.checkpoints if c.id == checkpoint_id), None)
            if checkpoint is not None:
                del state.messages[checkpoint.messages_len - state.messages_base :]
                state.transcript, state.unsent = checkpoint.transcript, checkpoint.unsent
                state.checkpoints = state.checkpoints[: state.checkpoints.index(checkpoint) + 1]
        return report

    async def _rollback_effects(
        self, state: AgentState, plan: RunPlan, boundary: int, checkpoint_id: str | None, reason: str
    ) -> RollbackReport:
        previous_phase = state.phase
        state.phase = Phase.ROLLING_BACK
        report = await saga.compensate(state, plan, boundary, RollbackReport(checkpoint_id=checkpoint_id, reason=reason))
        state.rollbacks.append(report)
        state.phase = previous_phase if report.clean else Phase.COMPENSATION_FAILED
        return report

    async def _apply_failure_policy(self, state: AgentState, plan: RunPlan | None, reason: str) -> None:
        if plan is None:
            return
        policy = state.run.on_failure or plan.failure_policy
        if policy == FailurePolicy.KEEP or not state.effects:
            return
        target = state.checkpoints[-1].id if state.checkpoints and policy == FailurePolicy.ROLLBACK_TO_LAST_CHECKPOINT else None
        await self._rollback_to(state, plan, target, f"{policy}: {reason}")

    # --- helpers ---------------------------------------------------------------------------

    def _boundary(self, checkpoint_id: str) -> int:
        state = self._require_state()
        for checkpoint in state.checkpoints:
            if checkpoint.id == checkpoint_id:
                return checkpoint.effects_len
        known = ", ".join(c.id for c in state.checkpoints) or "none yet"
        raise ValueError(f"unknown checkpoint {checkpoint_id!r}; this run has: {known}")

    def _require_state(self) -> AgentState:
        if self._state is None or self._state.plan is None:
            raise ValueError("the run has not started yet")
        return self._state

    def _bad_call(self, state: AgentState, result: ToolResult) -> ToolResult:
        state.bad_tool_calls += 1
        state.last_error = result.output
        return result

    def _failure_message(self, reason: str) -> str:
        state = self._state
        assert state is not None
        if state.phase != Phase.COMPENSATION_FAILED:
            return reason
        left = [f"step {e.step} {e.tool}: {e.error}" for e in state.effects if e.status in (EffectStatus.UNDO_FAILED, EffectStatus.NOT_UNDONE)]
        return f"{reason}; compensation failed, effects not undone: {'; '.join(left)}"

    def _finish(self, phase: Phase, error: str | None = None) -> AgentResult:
        state = self._state  # the plan may not exist: a first model call that failed
        assert state is not None
        state.phase = phase
        if error:
            state.last_error = error
        if state.plan is not None:
            self._publish(state, state.plan)
        return AgentResult(
            workflow_id=state.workflow_id, phase=phase, answer=state.answer,
            steps=state.step, used=state.used, last_error=state.last_error,
            workspace=state.plan.workspace if state.plan else None,
            effects=[e for e in state.effects if state.plan and saga.undoable(state.plan, e) and e.status != EffectStatus.UNDONE],
        )

    def _elapsed_s(self, state: AgentState) -> float:
        started = datetime.fromisoformat(state.started_at) if state.started_at else workflow.now()
        return (workflow.now() - started).total_seconds()


def _checkpoint(state: AgentState, result: VerifyResult) -> Checkpoint:
    evidence = result.evidence
    tests = f" ({evidence.tests_run} tests)" if evidence.tests_run is not None else ""
    return Checkpoint(
        id=f"cp-{len(state.checkpoints) + 1}", step=state.step, created_at=workflow.now().isoformat(),
        effects_len=len(state.effects), messages_len=state.message_count,
        transcript=state.transcript, unsent=state.unsent,
        summary=f"step {state.step}: {' '.join(evidence.argv)} passed{tests}",
        evidence=evidence, patch_ref=result.patch_ref, workspace_ref=result.workspace_ref,
    )


def _changed_files(effects: list[Effect]) -> dict[str, Any]:
    """Paths written by these effects -> their bytes before the first write (None: absent)."""
    changed: dict[str, Any] = {}
    for effect in effects:
        undo = effect.undo or {}
        if "path" in undo and "previous" in undo and undo["path"] not in changed:
            changed[undo["path"]] = undo["previous"]
    return changed


def _parse_arguments(raw: str) -> tuple[dict[str, Any], str | None]:
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
    for name in ("path", "argv", "title", "to"):
        if name in args:
            value = args[name]
            text = " ".join(map(str, value)) if isinstance(value, list) else str(value)
            return text[:80]
    return ""


def _raise_if_cancelled(err: BaseException) -> None:
    """An activity or child cancelled because the run was cancelled is the run's cancellation,
    not a failure: it must take the cancellation path (compensate, end CANCELLED)."""
    if is_cancelled_exception(err):
        raise asyncio.CancelledError() from err


def _cause(err: BaseException) -> str:
    """The message of the first real failure under Temporal's Activity/ChildWorkflow wrappers."""
    while isinstance(err, (ActivityError, ChildWorkflowError)) and err.__cause__ is not None:
        err = err.__cause__
    if isinstance(err, ApplicationError):
        return err.message
    return str(err) or type(err).__name__
