"""Checkpoints, rollback, fork and the failure policy (deterministic, no I/O).

After a step that changed something, the profile's verifier runs (`checkpoint.verify`): a pass
records a `Checkpoint` (test evidence, the patch, a file manifest), a failure goes back to the
model and, with `revert_on_failed_verification`, the step's effects are undone. A rollback undoes
the effects above a checkpoint newest first (workflows/saga.py) and restores the conversation to
it. A fork (`AgentRun.resume_from`) starts a new run from another run's checkpoint.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError

from ratchet.contracts import (
    AgentState,
    Checkpoint,
    Effect,
    EffectStatus,
    FailurePolicy,
    LoadCheckpoint,
    Message,
    Phase,
    RollbackReport,
    RunPlan,
    TranscriptSlice,
    VerifyRequest,
    VerifyResult,
)
from ratchet.contracts.activities import FORK, TRANSCRIPT_MESSAGES, VERIFY
from ratchet.core import keys
from . import calls, effects_archive, hosts, saga
from .errors import RunFailed, cause, invalid_input, raise_if_cancelled
from .hosts import HostLost


def boundary(state: AgentState, checkpoint_id: str) -> int:
    """How many effects the run had at the checkpoint; an unknown id is the caller's mistake."""
    for checkpoint in state.checkpoints:
        if checkpoint.id == checkpoint_id:
            return checkpoint.effects_len
    known = ", ".join(c.id for c in state.checkpoints) or "none yet"
    raise ValueError(f"unknown checkpoint {checkpoint_id!r}; this run has: {known}")


async def fork(state: AgentState, plan: RunPlan) -> None:
    """Start this run from another run's checkpoint: its conversation and its workspace files."""
    source = state.run.resume_from
    assert source is not None
    try:
        forked = await calls.call(
            FORK,
            LoadCheckpoint(
                workflow_id=source.workflow_id, checkpoint_id=source.checkpoint_id, workspace=plan.workspace
            ),
            summary=f"fork from {source.workflow_id} {source.checkpoint_id}",
        )
    except ActivityError as err:
        raise_if_cancelled(err)
        raise invalid_input(err) from None
    # the host that restored the files holds the new run's workspace (on the shared queue: any host)
    checkpoint = forked.checkpoint
    state.workspace_host, state.workspace_snapshot = forked.binding.host_queue, forked.binding.manifest_ref
    objective = Message(role="user", content=state.run.objective, pinned=True)  # the window keeps it
    state.messages = list(checkpoint.messages or []) + [objective]
    state.messages_base = checkpoint.messages_base
    state.transcript = checkpoint.transcript
    state.unsent = checkpoint.unsent
    # a rollback to where the fork began keeps the fork's objective
    state.checkpoints = [
        checkpoint.model_copy(
            update={
                "messages": None,
                "effects_len": 0,
                "messages_len": checkpoint.messages_len + 1,
            }
        )
    ]


def verified(state: AgentState) -> bool:
    """True when the workspace is as the last checkpoint (a passed verification) left it: every
    effect since then was undone (a failed verification reverted it)."""
    if not state.checkpoints:
        return False
    since = effects_archive.local(state, state.checkpoints[-1].effects_len)
    return all(e.status == EffectStatus.UNDONE for e in state.effects[since:])


async def verify(state: AgentState, plan: RunPlan) -> bool:
    """Run the verifier; pass -> checkpoint (True); fail -> evidence to the model (and revert)."""
    assert plan.verifier is not None
    since = state.checkpoints[-1].effects_len if state.checkpoints else 0
    verifier = plan.verifier
    request = VerifyRequest(
        key=keys.call_key(state.workflow_id, state.step, "verify"),
        workflow_id=state.workflow_id,
        workspace=plan.workspace,
        verifier=verifier,
        changed=_changed_files(state.effects[effects_archive.local(state, since) :]),
        sandbox=plan.sandbox,
    )

    def schedule(host: str | None, options: hosts.HostOptions) -> Awaitable[VerifyResult]:
        return calls.call(
            VERIFY,
            request.model_copy(update={"host": host}) if host else request,
            start_to_close_s=verifier.timeout_s + 60,
            summary=f"step {state.step}: verify {' '.join(verifier.argv)}"[:200],
            **options,
        )

    try:
        result = await hosts.on_workspace_host(state, plan, schedule)  # in the workspace, on its host
    except ActivityError as err:
        raise_if_cancelled(err)
        if hosts.host_gone(err):
            raise HostLost(state.workspace_host, f"step {state.step}: verify") from None
        raise RunFailed(f"step {state.step}: verification could not run: {cause(err)}") from None
    evidence = result.evidence
    if evidence.passed:
        state.checkpoints.append(_checkpoint(state, result))
        return True
    note = f"Verification failed: `{' '.join(evidence.argv)}` exited {evidence.exit_code}.\n{evidence.output}"
    if plan.revert_on_failed_verification:
        last = state.checkpoints[-1].id if state.checkpoints else None
        report = await rollback_effects(state, plan, since, last, "verification failed", fail_over=True)
        if not report.clean:
            raise RunFailed(f"reverting a failed step did not complete: {report.errors}")
        note += f"\nYour changes since {last or 'the start'} were reverted ({len(report.undone)} undone)."
    state.messages.append(Message(role="user", content=note))
    return False


async def rollback_to(
    state: AgentState,
    plan: RunPlan,
    checkpoint_id: str | None,
    reason: str,
    restored: str | None = None,
    fail_over: bool = False,
) -> RollbackReport:
    """Undo every effect above the checkpoint (all, without one) and restore its conversation.
    `restored`: the workspace was restored to the checkpoint already (a failover; saga.compensate).
    `fail_over`: a workspace host found gone raises `HostLost` (saga.compensate)."""
    since = boundary(state, checkpoint_id) if checkpoint_id else 0
    report = await rollback_effects(state, plan, since, checkpoint_id, reason, restored=restored, fail_over=fail_over)
    if report.clean:
        checkpoint = next((c for c in state.checkpoints if c.id == checkpoint_id), None)
        if checkpoint is not None:
            await _messages_back_to(state, checkpoint)
            del state.messages[checkpoint.messages_len - state.messages_base :]
            state.transcript, state.unsent = checkpoint.transcript, checkpoint.unsent
            state.checkpoints = state.checkpoints[: state.checkpoints.index(checkpoint) + 1]
    return report


async def _messages_back_to(state: AgentState, checkpoint: Checkpoint) -> None:
    """A checkpoint older than what the last handover kept (workflows/handover.py): its messages
    from `unsent` on come back from the transcript artifact, where the model's later calls put them."""
    if checkpoint.unsent >= state.messages_base or state.transcript is None:
        return
    state.messages = await calls.call(
        TRANSCRIPT_MESSAGES,
        TranscriptSlice(digest=state.transcript, start=checkpoint.unsent, stop=checkpoint.messages_len),
        summary=f"read messages back to {checkpoint.id}",
    )
    state.messages_base = checkpoint.unsent


async def rollback_effects(
    state: AgentState,
    plan: RunPlan,
    since: int,
    checkpoint_id: str | None,
    reason: str,
    restored: str | None = None,
    fail_over: bool = False,
) -> RollbackReport:
    """Undo the effects above `since` (saga.compensate: `restored` and `fail_over` as there)."""
    previous_phase = state.phase
    state.phase = Phase.ROLLING_BACK
    await effects_archive.restore(state, since)
    report = RollbackReport(checkpoint_id=checkpoint_id, reason=reason)
    try:
        await saga.compensate(state, plan, since, report, restored, fail_over)
    finally:  # cut short by a lost host (HostLost), the report still says what was undone
        state.rollbacks.append(report)
    state.phase = previous_phase if report.clean else Phase.COMPENSATION_FAILED
    return report


def failure_target(state: AgentState, plan: RunPlan) -> tuple[FailurePolicy | None, Checkpoint | None]:
    """What a failed or cancelled run's policy (the run's `on_failure`, else the profile's) undoes:
    (the policy, None when there is nothing to undo; the checkpoint it goes back to, None: every effect)."""
    policy = state.run.on_failure or plan.failure_policy
    if policy == FailurePolicy.KEEP or not effects_archive.count(state):
        return None, None
    if state.checkpoints and policy == FailurePolicy.ROLLBACK_TO_LAST_CHECKPOINT:
        return policy, state.checkpoints[-1]
    return policy, None


def _checkpoint(state: AgentState, result: VerifyResult) -> Checkpoint:
    evidence = result.evidence
    tests = f" ({evidence.tests_run} tests)" if evidence.tests_run is not None else ""
    return Checkpoint(
        id=f"cp-{len(state.checkpoints) + 1}",
        step=state.step,
        created_at=workflow.now().isoformat(),
        effects_len=effects_archive.count(state),
        messages_len=state.message_count,
        transcript=state.transcript,
        unsent=state.unsent,
        summary=f"step {state.step}: {' '.join(evidence.argv)} passed{tests}",
        evidence=evidence,
        patch_ref=result.patch_ref,
        workspace_ref=result.workspace_ref,
    )


def _changed_files(effects: list[Effect]) -> dict[str, Any]:
    """Paths written by these effects -> their bytes before the first write (None: absent)."""
    changed: dict[str, Any] = {}
    for effect in effects:
        undo = effect.undo or {}
        if "path" in undo and "previous" in undo and undo["path"] not in changed:
            changed[undo["path"]] = undo["previous"]
    return changed
