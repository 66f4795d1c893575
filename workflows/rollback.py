"""Going back: rollbacks and the failure policy, in one place (deterministic, no I/O).

Every way a run goes back to a boundary runs through here:
- a person's `rollback` update (`Requests`: the handler queues it, the loop serves it between steps;
  the step in flight is interrupted for it, workflows/interrupts.py);
- the revert of a step whose verification failed (workflows/checkpoints.py);
- a failover to another host when the workspace's host is lost (`fail_over`; the host side is
  workflows/failover.py);
- a failed or cancelled run's failure policy (`on_failure`), decided and applied here.

A rollback's target (a checkpoint, or the run's start, and the effect boundary it implies) is
resolved once (`resolve`); `undo_above` undoes the effects above it newest first (workflows/saga.py)
and `rewind` takes the conversation and the checkpoints back to it.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ApplicationError

from ratchet.contracts import (
    AgentState,
    EffectStatus,
    ErrorType,
    FailurePolicy,
    Message,
    Phase,
    RollbackReport,
    RollbackRequest,
    RunPlan,
    TranscriptSlice,
)
from ratchet.contracts.activities import TRANSCRIPT_MESSAGES
from ratchet.contracts.rollback_plan import START, Target, plan_of as plan_of, resolve
from . import calls, effects_archive, failover, handoffs, saga, sessions
from .errors import FailRun
from .hosts import HostLost, host_name
from .phases import Phases


async def undo_above(
    state: AgentState, plan: RunPlan, phases: Phases, target: Target, reason: str, restored: str | None = None
) -> RollbackReport:
    """Undo every effect above `target`, newest first (archived ones brought back first), recorded
    in `state.effects.rollbacks`. `restored`: the workspace was restored to the target already (a
    failover), so its workspace effects are reverted: marked undone with this note. A workspace
    host found gone raises HostLost; the report still says what was undone."""
    previous_phase = phases.enter(state, Phase.ROLLING_BACK, plan)
    await effects_archive.restore(state, target.since)
    report = RollbackReport(checkpoint_id=target.id, reason=reason)
    try:
        if restored is not None:
            saga.mark_restored(state, plan, target.since, restored, report)
        await saga.compensate(state, plan, target.since, report)
    except HostLost:
        phases.back(state, previous_phase, plan)
        raise
    finally:
        state.effects.add_rollback(report)
    if report.clean:
        phases.back(state, previous_phase, plan)
    else:
        phases.enter(state, Phase.COMPENSATION_FAILED, plan)
    return report


async def rewind(state: AgentState, plan: RunPlan, target: Target) -> list[int]:
    """The conversation and the checkpoints back to `target` (the start: the system prompt and
    the objective, nothing the model has seen); a session's later turns go too (returned)."""
    checkpoint, conversation = target.checkpoint, state.conversation
    handoffs.rewind(state, checkpoint.messages_len if checkpoint is not None else 0)  # the plan then
    if checkpoint is None:
        state.effects.keep_checkpoints_to(None)
        prompt = state.plan.system_prompt if state.plan is not None else plan.system_prompt
        start = [Message(role="system", content=prompt), Message(role="user", content=state.run.objective)]
        conversation.messages.reset(start)
        conversation.transcript, conversation.unsent = None, 0
        return sessions.cut_to(state, None)
    if checkpoint.unsent < conversation.messages.base and conversation.transcript is not None:
        # older than what the last handover kept (workflows/handover.py): its messages from
        # `unsent` on come back from the transcript artifact, where the model's later calls put them
        slice_ = TranscriptSlice(digest=conversation.transcript, start=checkpoint.unsent, stop=checkpoint.messages_len)
        read = await calls.call(TRANSCRIPT_MESSAGES, slice_, summary=f"read messages back to {checkpoint.id}")
        conversation.messages.reset(read, base=checkpoint.unsent)
    conversation.messages.cut_at(checkpoint.messages_len)
    conversation.transcript, conversation.unsent = checkpoint.transcript, checkpoint.unsent
    state.effects.keep_checkpoints_to(checkpoint)
    return sessions.cut_to(state, checkpoint)


class Requests:
    """The rollbacks people asked for (the `rollback` update), served by the loop in order."""

    def __init__(self) -> None:
        self._queue: list[tuple[int, RollbackRequest]] = []
        self._done: dict[int, RollbackReport | str] = {}
        self._next = 0

    def __bool__(self) -> bool:
        return bool(self._queue)

    async def submit(self, request: RollbackRequest) -> RollbackReport:
        """The update's body: queued, then the report once the loop served it. A target an
        earlier rollback removed fails the update (not the run)."""
        request_id, self._next = self._next, self._next + 1
        self._queue.append((request_id, request))
        await workflow.wait_condition(lambda: request_id in self._done)
        outcome = self._done.pop(request_id)
        if isinstance(outcome, str):
            raise ApplicationError(outcome, type=ErrorType.INVALID_INPUT, non_retryable=True)
        return outcome

    async def serve(self, state: AgentState, plan: RunPlan, phases: Phases) -> str | None:
        """Serve the queued rollbacks; what the last one asked to do then if not `continue` (`stop`
        wins over `rerun`), else None. A request stays queued until it is done: a lost host
        (HostLost) fails the run over, then it is served there."""
        then: str | None = None
        while self._queue:
            request_id, request = self._queue[0]
            try:
                target = resolve(state, request.checkpoint_id)
            except ValueError as exc:  # accepted, but an earlier rollback went back beyond it
                self._queue.pop(0)
                self._done[request_id] = f"{exc}: an earlier rollback went back before it"
                continue
            report = await undo_above(state, plan, phases, target, "rollback requested")
            if report.clean:
                report.turns_removed = await rewind(state, plan, target)
            self._queue.pop(0)
            self._done[request_id] = report
            if not report.clean:
                raise FailRun(f"rollback to {target.name} did not complete")
            if request.then != "continue" and then != "stop":
                then = request.then
        return then


async def revert_step(state: AgentState, plan: RunPlan, phases: Phases) -> RollbackReport:
    """A step whose verification failed: its effects undone, back to the last checkpoint's
    workspace (the conversation stays: the model is told what failed)."""
    target = Target(state.effects.checkpoints.items[-1]) if state.effects.checkpoints.items else START
    report = await undo_above(state, plan, phases, target, "verification failed")
    if not report.clean:
        raise FailRun(f"reverting a failed step did not complete: {report.errors}")
    return report


async def on_failure(state: AgentState, plan: RunPlan | None, phases: Phases, reason: str) -> None:
    """A failed or cancelled run's failure policy (the run's `on_failure`, else the profile's):
    keep, roll back to the last checkpoint (its conversation too), or roll back every effect
    (the conversation stays as it failed, for a person to read). If the workspace's host is found
    gone while undoing, the workspace is restored on another host to the target (its checkpoint's
    files, or the initial snapshot) and the rest undone there. A restore that cannot be done
    leaves the run COMPENSATION_FAILED with every effect's status, for a person to act on."""
    if plan is None:
        return
    policy = state.run.on_failure or plan.failure_policy
    if policy == FailurePolicy.KEEP or not state.effects.count:
        return
    last = policy == FailurePolicy.ROLLBACK_TO_LAST_CHECKPOINT and bool(state.effects.checkpoints.items)
    target = Target(state.effects.checkpoints.items[-1]) if last else START
    why = f"{policy}: {reason}"
    try:
        try:
            report = await undo_above(state, plan, phases, target, why)
        except HostLost as lost:
            why = f"{why} ({lost})"
            report, _ = await _restore_elsewhere(state, plan, phases, target, why, lost)
    except (HostLost, FailRun) as failed:
        state.last_error = str(failed)
        phases.enter(state, Phase.COMPENSATION_FAILED, plan)
        return
    if report.clean and target.checkpoint is not None:
        await rewind(state, plan, target)


MAX_FAILOVERS = 5
"""Per run (continue-as-new carries the count): a run that keeps losing hosts stops."""


async def fail_over(state: AgentState, plan: RunPlan, phases: Phases, lost: HostLost) -> None:
    """The workspace's host is lost: on another host from the newest checkpoint with a file
    manifest (none: the start), as a rollback to it, and the model told (workflows/failover.py)."""
    if len(state.workspace.failovers) >= MAX_FAILOVERS:
        raise FailRun(
            f"{lost}; the run lost its workspace host {len(state.workspace.failovers)} times already, giving up"
        )
    from_host = state.workspace.host
    restore_point = next((c for c in reversed(state.effects.checkpoints.items) if c.workspace_ref is not None), None)
    target = Target(restore_point)
    report, restored = await _restore_elsewhere(state, plan, phases, target, f"failover: {lost}", lost)
    if not report.clean:
        raise FailRun(f"{lost}; undoing the effects after {target.name} did not complete: {report.errors}")
    await rewind(state, plan, target)
    moved = state.workspace.failovers[-1]
    note = (
        f"The host that held your workspace ({host_name(from_host)}) was lost. The workspace was "
        f"{restored}, and the conversation went back to that point: redo any work after it."
    )
    if moved.undone:
        note += f" Undone: {'; '.join(moved.undone)}."
    if moved.irreversible:
        note += f" Left in place (irreversible): {'; '.join(moved.irreversible)}."
    state.conversation.messages.append(Message(role="user", content=note))
    phases.enter(state, Phase.ACTING, plan)


async def _restore_elsewhere(
    state: AgentState, plan: RunPlan, phases: Phases, target: Target, reason: str, lost: HostLost
) -> tuple[RollbackReport, str]:
    """The workspace restored to `target` on another host (which now holds it), the other effects
    above it undone there, the move recorded in `state.workspace.failovers`: the report, and how the
    workspace was restored (for people)."""
    from_host = state.workspace.host
    manifest = target.checkpoint.workspace_ref if target.checkpoint is not None else state.workspace.snapshot
    target_name = target.id or "the initial snapshot"
    restored = await failover.rehydrate(state, plan, manifest, target_name, lost)
    report = await undo_above(state, plan, phases, target, reason, restored=restored)
    failover.record(state, from_host, target.id, reason, restored, report)
    return report, restored


def failure_message(state: AgentState, reason: str) -> str:
    """The run's failure for its caller: after a compensation that failed, the effects left."""
    if state.phase != Phase.COMPENSATION_FAILED:
        return reason
    left = [
        f"step {e.step} {e.tool}: {e.error}"
        for e in state.effects.stack.items
        if e.status in (EffectStatus.UNDO_FAILED, EffectStatus.NOT_UNDONE)
    ]
    return f"{reason}; compensation failed, effects not undone: {'; '.join(left)}"
