"""AgentWorkflow: the agent's explicit state machine.

    STARTING -> (THINKING -> ACTING -> [verify -> checkpoint])* -> [verify] -> DONE | BUDGET_EXHAUSTED
    on failure or cancellation: ROLLING_BACK per the failure policy -> FAILED | CANCELLED |
    COMPENSATION_FAILED; a `rollback` update with then=stop ends in ROLLED_BACK.

This class holds the handlers, the start, the loop and the finish; the rest is plain functions over
state and plan (the table in docs/ARCHITECTURE.md): planning.py, step.py (think, act, verify),
rollback.py (every rollback and the failure policy), interrupts.py (what cuts a step short).
Deterministic and free of I/O: every model call, tool call, undo and verification is an activity;
all state is an `AgentState`, queryable at any moment.
"""

from __future__ import annotations

import asyncio
from typing import NoReturn

from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError

from ratchet.contracts import (
    AGENT_WORKFLOW,
    AgentResult,
    AgentState,
    ApproveRequest,
    AskRequest,
    Continuation,
    DecideRequest,
    Decision,
    ErrorType,
    FollowRequest,
    Phase,
    RejectRequest,
    RollbackPlanItem,
    RollbackReport,
    RollbackRequest,
    RunMessages,
    RunPlan,
    Transcript,
    TranscriptPage,
    TurnAnswer,
    TurnStatus,
)
from ratchet.core import budget as budgets
from . import (
    approvals,
    checkpoints,
    events,
    inbox,
    planning,
    failover,
    handover,
    interrupts,
    outcomes,
    rollback,
    sessions,
)
from .errors import RunFailed
from .hosts import HostLost
from .input import any_inputs, continued, parse_run
from .result import agent_result
from .step import OutOfBudget, step
from .visibility import Visibility


# Outside the SDK's sandbox, for speed (docs/ARCHITECTURE.md, "Outside the sandbox"): guarded by
# tests/test_determinism.py, workers that replay every task in tests, and the replay gate.
@workflow.defn(name=AGENT_WORKFLOW, sandboxed=False)
class AgentWorkflow:
    @workflow.init
    @any_inputs  # a start with two inputs fails the run, not the workflow task (workflows/input.py)
    def __init__(self, raw: RawValue = None) -> None:  # type: ignore[assignment]  # RawValue: any input
        self._continuation = continued(raw)
        self.events = events.RunStream(events.prior_state(self._continuation), lambda: self._state)  # events.py
        self._state: AgentState | None = self._continuation.continuation if self._continuation else None
        self._rollbacks = rollback.Requests()
        self._deadline = interrupts.Deadline()
        self._visibility = Visibility()
        self._inbox = inbox.Inbox()
        self._first_turn = 0  # the session's turn this execution started at (continue-as-new counts from it)

    @workflow.run
    async def run(self, raw: RawValue = None) -> AgentResult:  # type: ignore[assignment]  # RawValue: any input
        try:
            return await self._run(raw)
        finally:
            state = self._state
            if state is not None and state.phase.terminal:  # not when continuing as new: readers follow
                await self.events.close(state)  # however it ended: done, failed (planning too), cancelled

    async def _run(self, raw: RawValue) -> AgentResult:
        parsed = self._continuation or parse_run(raw)
        if isinstance(parsed, Continuation):
            state = parsed.continuation  # the state since __init__: handlers of the first task may have used it
            state.continued += 1
            self._first_turn = state.session.turn_number
            self._inbox.attach(state)
        else:
            self._state = state = planning.new_state(parsed)
            self._inbox.attach(state)
            await planning.prepare(state, self._visibility)
        plan = state.plan
        assert plan is not None
        try:
            if not isinstance(parsed, Continuation) and parsed.resume_from is not None:
                await checkpoints.fork(state, plan)  # binds the run to the host that restored the files
            elif not isinstance(parsed, Continuation):
                await failover.bind(state, plan)
            if not isinstance(parsed, Continuation) and plan.session is not None:
                sessions.open_first(state)  # the objective is the first turn; early messages by the policy
                early, state.session.inbox = state.session.inbox, []
                for message in early:
                    sessions.accept(state, message)
            self._visibility.publish(state, plan)
            return await self._loop(state, plan)
        except RunFailed as failure:
            await self._fail(state, plan, str(failure))
        except asyncio.CancelledError:
            await rollback.on_failure(state, plan, "cancelled")
            state.phase = Phase.CANCELLED if state.phase != Phase.COMPENSATION_FAILED else state.phase
            self._visibility.publish(state, plan)  # `ratchet list` and RatchetPhase show how it ended
            raise

    # --- queries, signals and updates --------------------------------------------------------

    @workflow.query(name=RunMessages.STATE)
    def state(self) -> AgentState | None:
        return self._state

    @workflow.query(name=RunMessages.TRANSCRIPT)
    def transcript(self, page: TranscriptPage) -> Transcript:
        """The conversation, paged (`state` has everything; this stays small)."""
        return handover.page(self._require_state(), page)

    @workflow.signal(name=RunMessages.SEND_MESSAGE)
    def send_message(self, text: str) -> None:
        """A user message, added to the conversation at the next step boundary."""
        self._inbox.send(text)

    @workflow.update(name=RunMessages.ASK)
    async def ask(self, request: AskRequest) -> TurnAnswer:
        """A session's message; the turn's answer (or at once, `wait=False`, the turn to follow)."""
        return await sessions.answer(self._require_state(), request)

    @ask.validator
    def _validate_ask(self, request: AskRequest) -> None:
        sessions.validate_ask(self._require_state(), request)

    @workflow.update(name=RunMessages.ANSWER)
    async def answer(self, request: FollowRequest) -> TurnAnswer:
        """The answer to an earlier `ask` (by its message id), once its turn has ended."""
        return await sessions.follow(self._require_state(), request.message_id)

    @answer.validator
    def _validate_answer(self, request: FollowRequest) -> None:
        sessions.validate_follow(self._require_state(), request.message_id)

    @workflow.update(name=RunMessages.CLOSE)
    def close(self) -> str:
        """End the session once its turn in flight and the messages queued before are answered."""
        state = self._require_state()
        if sessions.policy(state) is None or state.phase.terminal:
            raise ValueError(f"run {state.workflow_id} is {state.phase}, not an open session")
        state.session.closing = True
        return f"closing after turn {state.session.turn_number + len(state.session.queued)}"

    @workflow.signal(name=RunMessages.PAUSE)
    def pause(self) -> None:
        self._inbox.set_paused(True)

    @workflow.signal(name=RunMessages.RESUME)
    def resume(self) -> None:
        self._inbox.set_paused(False)

    @workflow.update(name=RunMessages.APPROVE)
    def approve(self, request: ApproveRequest) -> str:
        decision = Decision(approved=True, by=request.by, at=workflow.now().isoformat())
        return approvals.decide(self._require_state(), request.call_id, decision)

    @approve.validator
    def _validate_approve(self, request: ApproveRequest) -> None:
        approvals.validate_decision(self._require_state(), request.call_id)

    @workflow.update(name=RunMessages.REJECT)
    def reject(self, request: RejectRequest) -> str:
        decision = Decision(approved=False, reason=request.reason, by=request.by, at=workflow.now().isoformat())
        return approvals.decide(self._require_state(), request.call_id, decision)

    @reject.validator
    def _validate_reject(self, request: RejectRequest) -> None:
        approvals.validate_decision(self._require_state(), request.call_id)

    @workflow.update(name=RunMessages.DECIDE)
    def decide(self, request: DecideRequest) -> str:
        """Decide what happens to a call whose outcome is unknown (workflows/outcomes.py)."""
        return outcomes.decide(self._require_state(), request)

    @decide.validator
    def _validate_decide(self, request: DecideRequest) -> None:
        outcomes.validate(self._require_state(), request.call_id)

    @workflow.query(name=RunMessages.ROLLBACK_PLAN)
    def rollback_plan(self, checkpoint_id: str) -> list[RollbackPlanItem]:
        """Dry run: the effects a rollback to `checkpoint_id` would undo, newest first."""
        return rollback.plan_of(self._require_state(), checkpoint_id)

    @workflow.update(name=RunMessages.ROLLBACK)
    async def rollback(self, request: RollbackRequest) -> RollbackReport:
        """Undo every effect above the checkpoint (newest first), restore the conversation to it,
        then continue or stop as asked (workflows/rollback.py). Served at once: the step in flight
        is interrupted. Once accepted it is applied, even if the caller stops waiting."""
        return await self._rollbacks.submit(request)

    @rollback.validator
    def _validate_rollback(self, request: RollbackRequest) -> None:
        state = self._require_state()
        if state.phase.terminal:
            raise ValueError(f"run is {state.phase}; nothing to roll back")
        rollback.resolve(state, request.checkpoint_id)

    async def _loop(self, state: AgentState, plan: RunPlan) -> AgentResult:
        self._deadline.start(state, plan)
        cut_short = False  # the deadline interrupted a step: its effects are not whole

        def stop() -> bool:  # what interrupts the step in flight: a rollback, a pause, the deadline, a message
            return bool(self._rollbacks) or state.paused or self._deadline.passed or sessions.interrupting(state)

        while True:
            try:
                if await self._rollbacks.serve(state, plan):
                    return self._finish(Phase.ROLLED_BACK)
                if state.paused and not self._deadline.passed:
                    await self._wait_while_paused(state, plan)
                    continue
                if plan.session is not None and not await self._session_turn(state, plan):
                    return self._finish(Phase.DONE)  # closed, or idle past its timeout
                inbox.deliver(state)
                reason = budgets.exhausted(plan.budget, state.used, self._deadline.elapsed_s(state, plan))
                if reason:
                    return await self._out_of_budget(state, plan, reason, cut_short)
                if plan.session is None and handover.due(plan):  # a session hands over between turns
                    await handover.hand_over(state, plan, self.events, lambda: bool(self._rollbacks))
                    continue  # a rollback came in first: serve it
                state.step += 1
                answer = await interrupts.race(step(state, plan, self._visibility), stop, state)
            except interrupts.Interrupted:
                cut_short = self._deadline.passed
                continue
            except OutOfBudget as refused:  # the next model call could not fit: nothing was spent on it
                return self._finish(Phase.BUDGET_EXHAUSTED, error=str(refused))
            except HostLost as lost:  # the workspace's host is gone (in a step or an undo): on elsewhere
                await rollback.fail_over(state, plan, lost)
                continue
            if answer is not None and not self._rollbacks:  # an accepted rollback is served first
                state.answer = answer
                if plan.session is None:
                    return self._finish(Phase.DONE, error=budgets.overrun(plan.budget, state.used))
                await sessions.answered(state, plan, answer)

    async def _session_turn(self, state: AgentState, plan: RunPlan) -> bool:
        """A session's turn in flight goes on, or ends (an interrupting message, its own budget); between
        turns the next starts, or the session waits for a message (AWAITING_MESSAGE; continuing as new
        when due). False: it ends (closed, or idle past its timeout)."""
        if sessions.interrupting(state):
            sessions.close_turn(state, TurnStatus.INTERRUPTED, error="interrupted by a message")
        elif (why := sessions.turn_exhausted(state)) is not None:
            sessions.close_turn(state, TurnStatus.BUDGET_EXHAUSTED, error=why)
        while not sessions.turn_running(state):
            if state.session.queued:
                sessions.open_next(state)
                break
            if state.session.closing:
                return False
            state.phase = Phase.AWAITING_MESSAGE
            self._visibility.publish(state, plan)
            woken = lambda: sessions.waiting(state) or bool(self._rollbacks)  # noqa: E731
            session = plan.session
            assert session is not None
            if state.session.turn_number - self._first_turn >= session.turns_per_run or handover.due(plan):
                await handover.hand_over(state, plan, self.events, woken)  # returns only if woken first
            try:
                await workflow.wait_condition(woken, timeout=session.idle_timeout_s, timeout_summary="idle")
            except TimeoutError:
                return False
            if self._rollbacks:
                return True  # the loop serves it, then comes back here
        self._visibility.publish(state, plan)
        return True

    async def _out_of_budget(self, state: AgentState, plan: RunPlan, reason: str, cut_short: bool) -> AgentResult:
        """BUDGET_EXHAUSTED. At a step boundary the finished steps' work stays; a step the deadline
        cut short is not whole, so the run's failure policy applies first, as for a failure."""
        if cut_short:
            await rollback.on_failure(state, plan, reason)
            if state.phase == Phase.COMPENSATION_FAILED:
                await self._fail(state, plan, reason, policy_applied=True)
        return self._finish(Phase.BUDGET_EXHAUSTED, error=reason)

    async def _fail(self, state: AgentState, plan: RunPlan, reason: str, policy_applied: bool = False) -> NoReturn:
        """End FAILED (COMPENSATION_FAILED when undoing did not complete) after the failure policy."""
        if not policy_applied:
            await rollback.on_failure(state, plan, reason)
        phase = Phase.COMPENSATION_FAILED if state.phase == Phase.COMPENSATION_FAILED else Phase.FAILED
        self._finish(phase, error=reason)
        message = rollback.failure_message(state, reason)
        raise ApplicationError(message, type=ErrorType.AGENT_FAILED, non_retryable=True) from None

    async def _wait_while_paused(self, state: AgentState, plan: RunPlan) -> None:
        """Costs nothing but history while paused; a rollback request is served while paused, and
        the deadline ends a paused run."""
        running_phase, state.phase = state.phase, Phase.PAUSED
        self._visibility.publish(state, plan)
        await workflow.wait_condition(lambda: not state.paused or bool(self._rollbacks) or self._deadline.passed)
        state.phase = running_phase
        self._visibility.publish(state, plan)

    def _require_state(self) -> AgentState:
        if self._state is None or self._state.plan is None:
            raise ValueError("the run has not started yet")
        return self._state

    def _finish(self, phase: Phase, error: str | None = None) -> AgentResult:
        state = self._state
        assert state is not None and state.plan is not None
        state.phase = phase
        if error:
            state.last_error = error
        self._visibility.publish(state, state.plan)
        return agent_result(state)
