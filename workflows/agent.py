"""AgentWorkflow: the agent's explicit state machine.

    STARTING -> (THINKING -> ACTING -> [verify -> checkpoint])* -> [verify] -> DONE | BUDGET_EXHAUSTED
    on failure or cancellation: ROLLING_BACK per the failure policy -> FAILED | CANCELLED |
    COMPENSATION_FAILED; a `rollback` update with then=stop ends in ROLLED_BACK.

A final answer is taken only when it is whole (not cut off at the output limit) and, when the
profile has a verifier, only when the workspace as it stands passed it: a failing check goes
back to the model, within the budget.

This class holds the handlers, the start, the loop and the finish. What a step does is in plain
functions over state and plan: acting.py (tool calls, approvals, timers, sub-agents),
checkpoints.py (verification, checkpoints, rollback, fork, failure policy), saga.py (undo),
failover.py and hosts.py (the host holding the workspace; failing over when it is lost),
interrupts.py (the deadline, a rollback or a pause cutting the step in flight short), errors.py. Deterministic and free of I/O: every model call, tool call, undo and verification is
an activity; all state is an `AgentState`, queryable at any moment.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta

from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import ActivityError, ApplicationError

from ratchet.contracts import (
    AGENT_WORKFLOW,
    AgentResult,
    AgentRun,
    AgentState,
    ApproveRequest,
    Continuation,
    DecideRequest,
    Decision,
    EffectClass,
    EffectStatus,
    ErrorType,
    Message,
    ModelReply,
    ModelRequest,
    Phase,
    PlanRun,
    RejectRequest,
    RollbackPlanItem,
    OutcomeDecision,
    RollbackReport,
    RollbackRequest,
    RunMessages,
    RunPlan,
    Transcript,
    TranscriptPage,
    scrub_text,
)
from ratchet.contracts.activities import MODEL_CALL, PREPARE, Retry
from ratchet.core import budget as budgets
from . import calls
from . import acting, approvals, checkpoints, effects_archive, failover, handover, interrupts, outcomes, saga
from .errors import RunFailed, cause, invalid_input, raise_if_cancelled, root
from .hosts import HostLost
from .input import parse_run
from .visibility import Visibility

CUT_OFF = (
    "Your last reply was cut off at the output token limit, so it is not taken as your final answer. "
    "Continue, more briefly: give the final answer in a shorter reply, or call a tool."
)


class OutOfBudget(Exception):
    """The next model call cannot fit in what is left of the token or cost budget (the model
    activity refused it before calling the model)."""


# Outside the SDK's sandbox (bench/results/latest.md): the sandbox re-imported this module for every
# run and ran code via exec for every payload: 5.6 ms worker CPU per step, 258 KiB per cached run
# (99 KiB without), half the replay speed; and a long-lived worker picked up half-edited files from
# disk. Determinism is guarded instead by machines: tests/test_determinism.py checks every module
# of workflows/ against an import allowlist and a list of forbidden calls, and replays the corpus
# under the SDK's sandbox; every test worker replays each task (max_cached_workflows=0); and the
# replay gate runs over tests/histories before every deploy.
@workflow.defn(name=AGENT_WORKFLOW, sandboxed=False)
class AgentWorkflow:
    def __init__(self) -> None:
        self._state: AgentState | None = None
        self._rollbacks: list[tuple[int, RollbackRequest]] = []
        self._rollback_done: dict[int, RollbackReport] = {}
        self._next_request = 0
        self._visibility = Visibility()
        self._early_inbox: list[str] = []
        self._early_paused: bool | None = None
        """Signals that arrive before the state exists (same first task as the start) wait here."""
        self._deadline_passed = False
        """The time budget's durable timer fired (`_start_deadline`): the step in flight is interrupted."""
        self._deadline: asyncio.Task[None] | None = None

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
                Message(role="system", content=plan.system_prompt),
                Message(role="user", content=parsed.objective),
            ]
        plan = state.plan
        assert plan is not None
        try:
            if not isinstance(parsed, Continuation) and parsed.resume_from is not None:
                await checkpoints.fork(state, plan)  # binds the run to the host that restored the files
            elif not isinstance(parsed, Continuation):
                await failover.bind(state, plan)
            self._visibility.publish(state, plan)
            return await self._loop(state, plan)
        except RunFailed as failure:
            await failover.apply_failure_policy(state, state.plan, str(failure))
            phase = Phase.COMPENSATION_FAILED if state.phase == Phase.COMPENSATION_FAILED else Phase.FAILED
            self._finish(phase, error=str(failure))
            raise ApplicationError(
                self._failure_message(str(failure)), type=ErrorType.AGENT_FAILED, non_retryable=True
            ) from None
        except asyncio.CancelledError:
            await failover.apply_failure_policy(state, state.plan, "cancelled")
            state.phase = Phase.CANCELLED if state.phase != Phase.COMPENSATION_FAILED else state.phase
            self._visibility.publish(state, plan)  # `ratchet list` and RatchetPhase show how it ended
            raise

    def _take_early_signals(self, state: AgentState) -> None:
        """Signals of the first task, before the state existed; later ones go to the state directly
        (so a resume during run.prepare is not undone by an earlier pause, and messages keep order)."""
        state.inbox[:0] = self._early_inbox
        if self._early_paused is not None:
            state.paused = self._early_paused

    # --- queries and updates -------------------------------------------------------------

    @workflow.query(name=RunMessages.STATE)
    def state(self) -> AgentState | None:
        return self._state

    @workflow.query(name=RunMessages.TRANSCRIPT)
    def transcript(self, page: TranscriptPage) -> Transcript:
        """The conversation, paged (`state` has everything; this stays small)."""
        state = self._require_state()
        offset = max(page.offset, state.messages_base)  # earlier ones: in the transcript artifact
        start = offset - state.messages_base
        return Transcript(
            total=state.message_count,
            offset=offset,
            messages=state.messages[start : start + page.limit],
        )

    @workflow.signal(name=RunMessages.SEND_MESSAGE)
    def send_message(self, text: str) -> None:
        """A user message, added to the conversation at the next step boundary."""
        if not isinstance(text, str) or not text.strip():
            return
        text = scrub_text(text[:100_000])
        (self._state.inbox if self._state is not None else self._early_inbox).append(text)

    @workflow.signal(name=RunMessages.PAUSE)
    def pause(self) -> None:
        self._set_paused(True)

    @workflow.signal(name=RunMessages.RESUME)
    def resume(self) -> None:
        self._set_paused(False)

    def _set_paused(self, paused: bool) -> None:
        if self._state is None:
            self._early_paused = paused
        else:
            self._state.paused = paused

    @workflow.update(name=RunMessages.APPROVE)
    def approve(self, request: ApproveRequest) -> str:
        self._require_state().decisions[request.call_id] = Decision(approved=True)
        return f"approved {request.call_id}"

    @approve.validator
    def _validate_approve(self, request: ApproveRequest) -> None:
        approvals.validate_decision(self._require_state(), request.call_id)

    @workflow.update(name=RunMessages.REJECT)
    def reject(self, request: RejectRequest) -> str:
        self._require_state().decisions[request.call_id] = Decision(approved=False, reason=request.reason)
        return f"rejected {request.call_id}"

    @reject.validator
    def _validate_reject(self, request: RejectRequest) -> None:
        approvals.validate_decision(self._require_state(), request.call_id)

    @workflow.update(name=RunMessages.DECIDE)
    def decide(self, request: DecideRequest) -> str:
        """Decide what happens to a call whose outcome is unknown (workflows/outcomes.py)."""
        self._require_state().outcome_decisions[request.call_id] = OutcomeDecision(
            choice=request.choice,
            result=request.result,
            reason=request.reason,
        )
        return f"{request.choice} {request.call_id}"

    @decide.validator
    def _validate_decide(self, request: DecideRequest) -> None:
        outcomes.validate(self._require_state(), request.call_id)

    @workflow.query(name=RunMessages.ROLLBACK_PLAN)
    def rollback_plan(self, checkpoint_id: str) -> list[RollbackPlanItem]:
        """Dry run: the effects a rollback to `checkpoint_id` would undo, newest first."""
        state = self._require_state()
        return saga.rollback_plan(state, state.plan, checkpoints.boundary(state, checkpoint_id))

    @workflow.update(name=RunMessages.ROLLBACK)
    async def rollback(self, request: RollbackRequest) -> RollbackReport:
        """Undo every effect above the checkpoint (newest first), restore the conversation to it,
        then continue or stop as asked. Served at once: the step in flight is interrupted
        (workflows/interrupts.py). Once accepted it is applied, even if the caller stops waiting."""
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
        checkpoints.boundary(state, request.checkpoint_id)

    # --- the loop ------------------------------------------------------------------------

    async def _prepare(self, run: AgentRun) -> RunPlan:
        try:
            # A regular activity, not a local one: a local activity pending while the run is
            # evicted from the worker cache stalls the workflow task until it times out.
            return await calls.call(
                PREPARE,
                PlanRun(workflow_id=workflow.info().workflow_id, chain=workflow.info().first_execution_run_id),
                summary=f"prepare agent {run.agent}",
            )
        except ActivityError as err:
            raise_if_cancelled(err)
            failure = invalid_input(err)
            self._fail_unplanned(failure.message, root(err))
            raise failure from None

    def _fail_unplanned(self, error: str, failure: BaseException) -> None:
        """A run that could not be planned ends FAILED, and says so in visibility (agent, phase)
        when run.prepare's failure says the worker publishes search attributes."""
        state = self._state
        assert state is not None  # made before the run is planned
        state.phase, state.last_error = Phase.FAILED, error
        details = failure.details if isinstance(failure, ApplicationError) else ()
        publish = bool(details) and isinstance(details[0], dict) and details[0].get("search_attributes") is True
        self._visibility.publish(state, None, search_attributes=publish)

    async def _loop(self, state: AgentState, plan: RunPlan) -> AgentResult:
        self._start_deadline(state, plan)
        cut_short = False  # the deadline interrupted a step: its effects are not whole
        while True:
            if await self._serve_rollbacks(state, plan):
                return self._finish(Phase.ROLLED_BACK)
            if state.paused and not self._deadline_passed:
                await self._wait_while_paused(state, plan)
                continue
            self._deliver_inbox(state)
            reason = budgets.exhausted(plan.budget, state.used, self._elapsed_s(state, plan))
            if reason:
                return await self._out_of_budget(state, plan, reason, cut_short)
            if self._should_continue_as_new(plan):
                await workflow.wait_condition(lambda: workflow.all_handlers_finished() or bool(self._rollbacks))
                if self._rollbacks:
                    continue  # a rollback's handler waits for the loop: serve it first
                self._deliver_inbox(state)
                await effects_archive.archive(state, lambda effect: saga.undoable(plan, effect))
                workflow.continue_as_new(Continuation(continuation=handover.trimmed(state)))
            state.step += 1
            try:
                answer = await interrupts.race(self._step(state, plan), lambda: self._stop_requested(state), state)
            except interrupts.Interrupted:
                cut_short = self._deadline_passed
                continue
            except OutOfBudget as refused:  # the next model call could not fit: nothing was spent on it
                return self._finish(Phase.BUDGET_EXHAUSTED, error=str(refused))
            except HostLost as lost:  # the workspace's host is gone: on from the last checkpoint elsewhere
                await failover.fail_over(state, plan, lost)
                continue
            if answer is not None and not self._rollbacks:  # an accepted rollback is served first
                state.answer = answer
                return self._finish(Phase.DONE, error=budgets.overrun(plan.budget, state.used))

    async def _step(self, state: AgentState, plan: RunPlan) -> str | None:
        """THINK, ACT, VERIFY: the final answer, or None to go on. Raced against what may stop it."""
        reply = await self._think(state, plan)
        if not reply.message.tool_calls:
            if reply.finish_reason == "length":
                state.messages.append(Message(role="user", content=CUT_OFF))  # cut off: never a final answer
                return None
            if reply.output_error is not None:  # the answer does not match the output schema: back to the model
                acting.refuse_answer(state, plan, reply.output_error)
                return None
            state.output = reply.output
            # under a verifier the workspace as it stands must pass; a failing check goes back to
            # the model (it cannot end DONE)
            if plan.verifier is None or checkpoints.verified(state) or await checkpoints.verify(state, plan):
                return reply.message.content or ""
            return None
        effects_before = len(state.effects)
        await acting.act(state, plan, reply.message.tool_calls, self._visibility)
        changed = any(e.effect == EffectClass.COMPENSABLE for e in state.effects[effects_before:])
        if plan.verifier is not None and changed:
            await checkpoints.verify(state, plan)
        return None

    def _stop_requested(self, state: AgentState) -> bool:
        """What interrupts the step in flight: a rollback request, a pause, the deadline."""
        return bool(self._rollbacks) or state.paused or self._deadline_passed

    def _start_deadline(self, state: AgentState, plan: RunPlan) -> None:
        """The time budget as a durable timer (one per run, restarted by a continuation)."""
        if plan.budget.max_duration_s is None:
            return
        left = plan.budget.max_duration_s - self._elapsed_s(state, plan)
        if left <= 0:
            self._deadline_passed = True
            return

        async def deadline() -> None:
            await workflow.sleep(
                timedelta(seconds=left), summary=f"deadline: budget.max_duration_s {plan.budget.max_duration_s:g}s"
            )
            self._deadline_passed = True

        self._deadline = asyncio.create_task(deadline())

    async def _out_of_budget(self, state: AgentState, plan: RunPlan, reason: str, cut_short: bool) -> AgentResult:
        """BUDGET_EXHAUSTED. At a step boundary the finished steps' work stays; a step the deadline
        cut short is not whole, so the run's failure policy applies first, as for a failure."""
        if cut_short:
            await failover.apply_failure_policy(state, plan, reason)
            if state.phase == Phase.COMPENSATION_FAILED:
                self._finish(Phase.COMPENSATION_FAILED, error=reason)
                raise ApplicationError(self._failure_message(reason), type=ErrorType.AGENT_FAILED, non_retryable=True)
        return self._finish(Phase.BUDGET_EXHAUSTED, error=reason)

    async def _wait_while_paused(self, state: AgentState, plan: RunPlan) -> None:
        """Costs nothing but history while paused; a rollback request is served while paused, and
        the deadline ends a paused run."""
        running_phase, state.phase = state.phase, Phase.PAUSED
        self._visibility.publish(state, plan)
        await workflow.wait_condition(lambda: not state.paused or bool(self._rollbacks) or self._deadline_passed)
        state.phase = running_phase
        self._visibility.publish(state, plan)

    def _deliver_inbox(self, state: AgentState) -> None:
        for text in state.inbox:
            state.messages.append(Message(role="user", content=text))
        state.inbox.clear()

    def _should_continue_as_new(self, plan: RunPlan) -> bool:
        info = workflow.info()
        return info.is_continue_as_new_suggested() or info.get_current_history_length() >= plan.continue_as_new_events

    async def _think(self, state: AgentState, plan: RunPlan) -> ModelReply:
        state.phase = Phase.THINKING
        unsent = state.messages[state.unsent - state.messages_base :]
        tokens_left, cost_left = budgets.allowance(plan.budget, state.used)
        request = ModelRequest(
            step=state.step,
            call_ref=plan.call_ref,
            transcript=state.transcript,
            new_messages=unsent,
            max_tokens=tokens_left,
            max_cost_usd=cost_left,  # the activity refuses or caps a call that would not fit
        )
        try:
            reply = await calls.call(
                MODEL_CALL,
                request,
                summary=f"step {state.step}: model call",
                start_to_close_s=plan.model.timeout_s + 30,
                retry=Retry(
                    initial_s=MODEL_CALL.retry.initial_s,
                    maximum_s=plan.model.retry_max_interval_s,
                    maximum_attempts=plan.model.max_attempts,
                ),
            )
        except ActivityError as err:
            raise_if_cancelled(err)
            failure = root(err)
            if isinstance(failure, ApplicationError) and failure.type == ErrorType.BUDGET_EXHAUSTED:
                raise OutOfBudget(failure.message) from None
            raise RunFailed(f"step {state.step}: model call failed: {cause(err)}") from None
        state.used.steps += 1
        budgets.charge(state.used, reply.usage, plan.model)
        state.messages.append(reply.message)
        state.transcript = reply.transcript
        state.unsent = state.message_count
        return reply

    # --- rollback and failure policy -------------------------------------------------------

    async def _serve_rollbacks(self, state: AgentState, plan: RunPlan) -> bool:
        """Run requested rollbacks (the step in flight was interrupted for them); True if one asked
        the run to stop."""
        stop = False
        while self._rollbacks:
            request_id, request = self._rollbacks.pop(0)
            report = await checkpoints.rollback_to(state, plan, request.checkpoint_id, "rollback requested")
            self._rollback_done[request_id] = report
            if not report.clean:
                raise RunFailed(f"rollback to {request.checkpoint_id} did not complete")
            stop = stop or request.then == "stop"
        return stop

    # --- helpers ---------------------------------------------------------------------------

    def _require_state(self) -> AgentState:
        if self._state is None or self._state.plan is None:
            raise ValueError("the run has not started yet")
        return self._state

    def _failure_message(self, reason: str) -> str:
        state = self._state
        assert state is not None
        if state.phase != Phase.COMPENSATION_FAILED:
            return reason
        left = [
            f"step {e.step} {e.tool}: {e.error}"
            for e in state.effects
            if e.status in (EffectStatus.UNDO_FAILED, EffectStatus.NOT_UNDONE)
        ]
        return f"{reason}; compensation failed, effects not undone: {'; '.join(left)}"

    def _finish(self, phase: Phase, error: str | None = None) -> AgentResult:
        state = self._state  # the plan may not exist: a first model call that failed
        assert state is not None
        state.phase = phase
        if error:
            state.last_error = error
        if state.plan is not None:
            self._visibility.publish(state, state.plan)
        left = [
            e for e in state.effects if state.plan and saga.undoable(state.plan, e) and e.status != EffectStatus.UNDONE
        ]
        return AgentResult(
            workflow_id=state.workflow_id,
            phase=phase,
            answer=state.answer,
            output=state.output,
            steps=state.step,
            used=state.used,
            last_error=state.last_error,
            workspace=state.plan.workspace if state.plan else None,
            workspace_host=state.workspace_host,
            effects_left=len(left) + state.effects_archived_left,
            effects=left if workflow.info().parent is not None else [],  # a parent undoes a child's
        )

    def _elapsed_s(self, state: AgentState, plan: RunPlan) -> float:
        started = datetime.fromisoformat(state.started_at) if state.started_at else workflow.now()
        elapsed = (workflow.now() - started).total_seconds()
        if self._deadline_passed and plan.budget.max_duration_s is not None:  # the timer is the authority
            return max(elapsed, plan.budget.max_duration_s)
        return elapsed
