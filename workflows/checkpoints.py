"""Verification, checkpoints and fork (deterministic, no I/O).

After a step that changed something, the profile's verifier runs (`checkpoint.verify`): a pass
records a `Checkpoint` (test evidence, the patch, a file manifest), a failure goes back to the
model and, with `revert_on_failed_verification`, the step's effects are undone
(workflows/rollback.py, where every rollback goes back to a checkpoint). A verifier that ran no
test showed nothing either way: the step is kept as a checkpoint marked unverified
(`Checkpoint.verified` False), and the model is told. A fork
(`AgentRun.resume_from`) starts a new run from another run's checkpoint.
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
    Evidence,
    LoadCheckpoint,
    Message,
    RunPlan,
    VerifyRequest,
    VerifyResult,
)
from ratchet.contracts.activities import FORK, VERIFY
from ratchet.core import keys
from . import calls, hosts, rollback
from .errors import FailRun, cause, invalid_input, raise_if_cancelled
from .hosts import HostLost
from .phases import Phases


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
    state.workspace.bind(forked.binding.host_queue, forked.binding.manifest_ref)
    objective = Message(role="user", content=state.run.objective, pinned=True)  # the window keeps it
    conversation = state.conversation
    conversation.messages.reset(list(checkpoint.messages or []) + [objective], base=checkpoint.messages_base)
    conversation.transcript, conversation.unsent = checkpoint.transcript, checkpoint.unsent
    state.session.turns.reset([], base=checkpoint.turn)  # a session's fork goes on from the checkpoint's turn
    # a rollback to where the fork began keeps the fork's objective
    update = {"messages": None, "effects_len": 0, "messages_len": checkpoint.messages_len + 1}
    state.effects.add_checkpoint(checkpoint.model_copy(update=update))


def verified(state: AgentState) -> bool:
    """True when the workspace is as the last checkpoint (a verification that did not fail: passed,
    or ran no test) left it: every effect since then was undone (a failed verification reverted it)."""
    last = state.effects.last_checkpoint
    if last is None:
        return False
    return all(e.status == EffectStatus.UNDONE for e in state.effects.stack.since(last.effects_len))


async def verify(state: AgentState, plan: RunPlan, phases: Phases) -> bool:
    """Run the verifier; pass -> checkpoint (True); no test ran -> unverified checkpoint (True), the
    model told; fail -> evidence to the model (and revert)."""
    assert plan.verifier is not None
    previous = state.effects.last_checkpoint
    since = previous.effects_len if previous is not None else 0
    verifier = plan.verifier
    request = VerifyRequest(
        key=keys.call_key(state.workflow_id, state.step, "verify"),
        workflow_id=state.workflow_id,
        workspace=plan.workspace,
        verifier=verifier,
        changed=_changed_files(state.effects.stack.items[state.effects.stack.local(since) :]),
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
            raise HostLost(state.workspace.host, f"step {state.step}: verify") from None
        raise FailRun(f"step {state.step}: verification could not run: {cause(err)}") from None
    evidence = result.evidence
    if not evidence.failed:
        state.effects.add_checkpoint(_checkpoint(state, result))
        if evidence.no_tests:
            state.conversation.messages.append(Message(role="user", content=_unverified_note(evidence)))
        return True
    note = f"Verification failed: `{' '.join(evidence.argv)}` exited {evidence.exit_code}.\n{evidence.output}"
    if plan.revert_on_failed_verification:
        report = await rollback.revert_step(state, plan, phases)
        last = report.checkpoint_id or "the start"
        note += f"\nYour changes since {last} were reverted ({len(report.undone)} undone)."
    state.conversation.messages.append(Message(role="user", content=note))
    return False


def _unverified_note(evidence: Evidence) -> str:
    return (
        f"Verification ran no test: `{' '.join(evidence.argv)}` exited {evidence.exit_code} without running one. "
        "Your changes are kept, but nothing verified them."
    )


def _checkpoint(state: AgentState, result: VerifyResult) -> Checkpoint:
    """A passed verification's checkpoint, or an unverified one (the verifier ran no test)."""
    evidence = result.evidence
    tests = f" ({evidence.tests_run} tests)" if evidence.tests_run is not None else ""
    verdict = "ran no test: unverified" if evidence.no_tests else f"passed{tests}"
    return Checkpoint(
        id=f"cp-{state.effects.checkpoints.end + 1}",
        step=state.step,
        turn=state.session.turn_number,
        created_at=workflow.now().isoformat(),
        effects_len=state.effects.count,
        messages_len=state.conversation.count,
        transcript=state.conversation.transcript,
        unsent=state.conversation.unsent,
        summary=f"step {state.step}: {' '.join(evidence.argv)} {verdict}",
        evidence=evidence,
        verified=evidence.passed,
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
