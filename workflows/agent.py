"""AgentWorkflow: the agent's explicit state machine.

    STARTING -> (THINKING -> ACTING -> [verify -> checkpoint])* -> [verify] -> DONE | BUDGET_EXHAUSTED
    on failure or cancellation: ROLLING_BACK per the failure policy -> FAILED | CANCELLED |
    COMPENSATION_FAILED; a `rollback` update with then=stop ends in ROLLED_BACK.

This class holds the handlers, the start and the loop; the rest is plain functions over state and
plan (the table in docs/ARCHITECTURE.md): planning.py, step.py (think, act, verify), rollback.py
(every rollback and the failure policy), interrupts.py (what cuts a step short), turns.py (a
session between turns), result.py (how a run ends), phases.py (every phase change). Deterministic
and free of I/O: every model call, tool call, undo and verification is an activity; all state is an
`AgentState` (docs/STATE.md), queryable at any moment.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from temporalio import workflow
from temporalio.common import RawValue

from ratchet.contracts import (
    AGENT_WORKFLOW,
    AgentResult,
    AgentState,
    ApproveRequest,
    AskRequest,
    Continuation,
    DecideRequest,
    Decision,
    FollowRequest,
    HandoffResponse,
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
from ratchet.contracts import TaskPriority, task_priority
from ratchet.contracts.decisions import ROLLBACK, DecisionProof, approve_value, decision_value, rollback_digest
from ratchet.core import budget as budgets
from . import (
    approvals,
    checkpoints,
    decision_check,
    events,
    failover,
    grants,
    handoffs,
    handover,
    inbox,
    interrupts,
    outcomes,
    planning,
    rollback,
)
from . import sessions, turns, upgrades
from .errors import FailRun
from .hosts import HostLost
from .input import any_inputs, continued, parse_run
from .phases import Phases
from .result import cancelled, fail, finish, out_of_budget
from .shared_parts import shared
from .step import OutOfBudget, TurnOutOfBudget, step
from .visibility import Visibility


# Outside the SDK's sandbox, for speed (docs/ARCHITECTURE.md, "Outside the sandbox"): guarded by
# tests/static/test_determinism.py, workers that replay every task in tests, and the replay gate.
@workflow.defn(name=AGENT_WORKFLOW, sandboxed=False)
class AgentWorkflow:
    @workflow.init
    @any_inputs  # a start with two inputs fails the run, not the workflow task (workflows/input.py)
    def __init__(self, raw: RawValue = None) -> None:  # type: ignore[assignment]  # RawValue: any input
        self._continuation = continued(raw)
        self._stream = events.RunStream(events.prior_state(self._continuation), lambda: self._state)  # events.py
        self._state: AgentState | None = self._continuation.continuation if self._continuation else None
        self._rollbacks = rollback.Requests()
        self._deadline = interrupts.Deadline()
        self._phases = Phases(Visibility(), self._stream)  # the one writer of state.phase (workflows/phases.py)
        self._inbox = inbox.Inbox()
        self._first_turn = 0  # the session's turn this execution started at (continue-as-new counts from it)

    @workflow.run
    async def run(self, raw: RawValue = None) -> AgentResult:  # type: ignore[assignment]  # RawValue: any input
        try:
            return await self._run(raw)
        finally:
            state = self._state
            if state is not None and state.phase.terminal:  # not when continuing as new: readers follow
                await self._stream.close(state)  # however it ended: done, failed (planning too), cancelled

    async def _run(self, raw: RawValue) -> AgentResult:
        parsed = self._continuation or parse_run(raw)
        if isinstance(parsed, Continuation):
            state = parsed.continuation  # the state since __init__: handlers of the first task may have used it
            state.continued += 1
            if state.plan is not None:
                state.plan = shared(state.plan)
            self._first_turn = state.session.turn_number
            self._inbox.attach(state)
        else:
            self._state = state = planning.new_state(parsed)
            self._inbox.attach(state)
            await planning.prepare(state, self._phases)
        upgrades.record(state)  # the build this execution runs on
        plan = state.plan
        assert plan is not None
        try:
            if not isinstance(parsed, Continuation) and parsed.resume_from is not None:
                await checkpoints.fork(state, plan)  # binds the run to the host that restored the files
            elif not isinstance(parsed, Continuation):
                await failover.bind(state, plan)
            if not isinstance(parsed, Continuation) and plan.session is not None:
                sessions.start(state)
            self._phases.publish(state, plan)
            return await self._loop(state, plan)
        except FailRun as failure:  # the plan now (a handoff may have changed it): its tools undo
            await fail(state, state.plan or plan, self._phases, str(failure), error_type=failure.error_type)
        except asyncio.CancelledError:
            await cancelled(state, state.plan or plan, self._phases)
            raise

    def task_priority(self, model_path: bool) -> TaskPriority | None:
        """What the run's activities and children carry (workflows/calls.py `priority`): its tenant
        and priority, the tenant's weight from the plan (before it: the workflow's own)."""
        state = self._state
        if state is None:
            return None
        weight = state.plan.fairness_weight if state.plan is not None else None
        return task_priority(state.run.tenant, state.run.priority, weight, model_path)

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
        return await sessions.ask(self._require_state(), request)

    @ask.validator
    def _validate_ask(self, request: AskRequest) -> None:
        sessions.validate_ask(self._require_state(), request)

    @workflow.update(name=RunMessages.ANSWER)
    async def answer(self, request: FollowRequest) -> TurnAnswer:
        """The answer to an earlier `ask` (by its message id), once its turn has ended."""
        return await sessions.await_answer(self._require_state(), request.message_id)

    @answer.validator
    def _validate_answer(self, request: FollowRequest) -> None:
        sessions.validate_answer(self._require_state(), request.message_id)

    @workflow.update(name=RunMessages.CLOSE)
    def close(self) -> str:
        """End the session once its turn in flight and the messages queued before are answered."""
        return sessions.close(self._require_state())

    @workflow.signal(name=RunMessages.MOVE)
    def move(self) -> None:
        """Nothing to record: the signal's workflow task tells whether the build changed, and a
        session between turns that may upgrade wakes on that and moves (workflows/turns.py)."""

    @workflow.signal(name=RunMessages.PAUSE)
    def pause(self) -> None:
        self._inbox.set_paused(True)

    @workflow.signal(name=RunMessages.RESUME)
    def resume(self) -> None:
        self._inbox.set_paused(False)

    @workflow.update(name=RunMessages.APPROVE)
    def approve(self, request: ApproveRequest) -> str:
        granted = grants.with_approval(self._require_state(), request, workflow.now())
        return self._decide_call(request.call_id, True, "", request.by, request.proof) + granted

    @approve.validator
    def _validate_approve(self, request: ApproveRequest) -> None:
        self._check_call(request.call_id, approve_value(request.grant), request.proof)

    @workflow.update(name=RunMessages.REJECT)
    def reject(self, request: RejectRequest) -> str:
        return self._decide_call(request.call_id, False, request.reason, request.by, request.proof)

    @reject.validator
    def _validate_reject(self, request: RejectRequest) -> None:
        self._check_call(request.call_id, decision_value("reject"), request.proof)

    @workflow.update(name=RunMessages.DECIDE)
    def decide(self, request: DecideRequest) -> str:
        """Decide what happens to a call whose outcome is unknown (workflows/outcomes.py)."""
        return outcomes.decide(self._require_state(), request)

    @decide.validator
    def _validate_decide(self, request: DecideRequest) -> None:
        state = self._require_state()
        pending = outcomes.validate(state, request.call_id)
        value = decision_value("decide", request.choice)
        decision_check.check(
            _current(state), state.workflow_id, request.call_id, pending.tool, pending.digest, value, request.proof
        )

    def _check_call(self, call_id: str, value: str, proof: DecisionProof | None) -> None:
        """An approval or rejection of a call that waits for one, its proof checked (workflows/decision_check.py)."""
        state = self._require_state()
        pending = approvals.validate_decision(state, call_id)
        decision_check.check(_current(state), state.workflow_id, call_id, pending.tool, pending.digest, value, proof)

    def _decide_call(self, call_id: str, approved: bool, reason: str, by: str, proof: DecisionProof | None) -> str:
        state = self._require_state()
        pending = next((p for p in state.calls.pending_approvals if p.call_id == call_id), None)
        digest, tool = (pending.digest, pending.tool) if pending is not None else ("", "")
        who = decision_check.signed(_current(state), tool, proof, by)
        decision = Decision(approved=approved, reason=reason, at=workflow.now().isoformat(), digest=digest, **who)
        return approvals.decide(state, call_id, decision)

    @workflow.update(name=RunMessages.RESPOND)
    def respond(self, response: HandoffResponse) -> str:
        """A person's answer to the run handed to their inbox: finish, reply or hand back (workflows/handoffs.py)."""
        return handoffs.respond(self._require_state(), response)

    @respond.validator
    def _validate_respond(self, response: HandoffResponse) -> None:
        handoffs.validate_response(self._require_state(), response)

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
        target = request.checkpoint_id
        value, digest = decision_value("rollback", target), rollback_digest(target, request.then)
        decision_check.check(_current(state), state.workflow_id, target, ROLLBACK, digest, value, request.proof)

    async def _loop(self, state: AgentState, plan: RunPlan) -> AgentResult:
        self._deadline.start(state, plan)
        cut_short = False  # the deadline interrupted a step: its effects are not whole

        def stop() -> bool:  # what interrupts the step in flight: a rollback, a pause, the deadline, a message
            return bool(self._rollbacks) or state.paused or self._deadline.passed or sessions.interrupting(state)

        while True:
            try:
                plan = _current(state)  # a handoff changes it (workflows/handoffs.py), a rollback may restore it
                then = await self._rollbacks.serve(state, plan, self._phases)
                plan = _current(state)
                if then == "stop":
                    return finish(state, self._phases, Phase.ROLLED_BACK)
                if then == "rerun":  # from the checkpoint, on the deployment's current build
                    await turns.move(state, plan, self._stream, lambda: bool(self._rollbacks), upgrade=True)
                    continue  # another rollback came in first: serve it
                if state.paused and not self._deadline.passed:
                    woken = lambda: bool(self._rollbacks) or self._deadline.passed  # noqa: E731
                    await interrupts.wait_while_paused(state, plan, self._phases, woken)
                    continue
                if plan.session is not None and not await self._next_turn(state, plan):
                    return finish(state, self._phases, Phase.DONE)  # closed, or idle past its timeout
                inbox.deliver(state)
                reason = budgets.exhausted(plan.budget, state.used, self._deadline.elapsed_s(state, plan))
                if reason:
                    return await out_of_budget(state, plan, self._phases, reason, cut_short)
                if plan.session is None and handover.due(plan):  # a session hands over between turns
                    await handover.hand_over(state, plan, self._stream, lambda: bool(self._rollbacks))
                    continue  # a rollback came in first: serve it
                answer = await self._advance(state, plan, stop)
            except interrupts.Interrupted:
                cut_short = self._deadline.passed
                continue
            except TurnOutOfBudget as refused:  # the turn's own budget: the turn ends, the session waits
                sessions.close_turn(state, TurnStatus.BUDGET_EXHAUSTED, error=str(refused))
                continue
            except OutOfBudget as refused:  # the next model call could not fit: nothing was spent on it
                return finish(state, self._phases, Phase.BUDGET_EXHAUSTED, error=str(refused))
            except HostLost as lost:  # the workspace's host is gone (in a step or an undo): on elsewhere
                await rollback.fail_over(state, plan, self._phases, lost)
                continue
            if answer is not None and not self._rollbacks:  # an accepted rollback is served first
                state.answer = answer
                if plan.session is None:
                    return finish(state, self._phases, Phase.DONE, error=budgets.overrun(plan.budget, state.used))
                await sessions.turn_answered(state, plan, answer)

    async def _advance(self, state: AgentState, plan: RunPlan, stop: Callable[[], bool]) -> str | None:
        """The next step; or, handed to a person, their answer (None: the run goes on, or was woken
        by a rollback, a pause or the deadline, which the loop serves before it waits again)."""
        if handoffs.waiting(state) is not None:
            woken = lambda: bool(self._rollbacks) or state.paused or self._deadline.passed  # noqa: E731
            return await handoffs.wait_for_person(state, plan, self._phases, woken)
        state.step += 1
        return await interrupts.race(step(state, plan, self._phases, self._stream), stop, state)

    async def _next_turn(self, state: AgentState, plan: RunPlan) -> bool:
        """A session's turn goes on or the next starts (workflows/turns.py); False: it ends."""
        rollback_asked = lambda: bool(self._rollbacks)  # noqa: E731
        return await turns.next_turn(state, plan, self._phases, self._stream, self._first_turn, rollback_asked)

    def _require_state(self) -> AgentState:
        if self._state is None or self._state.plan is None:
            raise ValueError("the run has not started yet")
        return self._state


def _current(state: AgentState) -> RunPlan:
    assert state.plan is not None
    return state.plan
