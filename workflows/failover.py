"""Workspaces across hosts: binding a run to a host, and failing over when that host is lost
(deterministic, no I/O; plain functions over state and plan).

Binding. A run whose profile has workspace tools runs `workspace.open` before step 1, as a local
activity where the plan allows them (the host of the worker running the workflow: its sticky
worker then runs the read-only workspace tools locally), else on the shared task queue (whichever
host takes it): that host opens the run's workspace, snapshots its files (the initial snapshot)
and returns its host queue; every other workspace activity then goes there (workflows/hosts.py).
A fork is bound by `checkpoint.fork` instead, a sub-agent first tries its parent's host, and a shadow
run (ratchet/contracts/shadow.py) gets a new workspace holding its original's initial snapshot.

Failover. A workspace activity the host did not take within `host_timeout_s` raises `HostLost`;
the loop fails the run over (`rollback.fail_over`, as a rollback to the newest checkpoint with a
file manifest; the failure policy does the same when it finds the host gone):
  (a) `rehydrate`: `workspace.rehydrate` on the shared queue: the taking host empties the run's
      workspace and restores the checkpoint's file manifest (no checkpoint: the initial snapshot);
  (b) the effects after the checkpoint: workspace effects were reverted by the restore (marked
      undone), every other compensable one is undone by its undo activity on the shared queue
      (saga.compensate, newest first, at most once per key through the ledger), irreversible ones
      are left and reported;
  (c) the conversation goes back to the checkpoint, as a rollback's does, plus a message telling
      the model what happened;
  (d) `record`: a `Failover` record goes to `state.workspace.failovers`.
A failover that cannot complete, or one more than `rollback.MAX_FAILOVERS`, fails the run (its
failure policy applies).
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ActivityError, FailureError

from ratchet.contracts import (
    AgentState,
    ArtifactRef,
    Failover,
    OpenWorkspace,
    RehydrateWorkspace,
    RollbackReport,
    RunPlan,
    WorkspaceBinding,
)
from ratchet.contracts.activities import WORKSPACE_OPEN, WORKSPACE_REHYDRATE
from . import calls, hosts
from .errors import FailRun, cause, raise_if_cancelled
from .hosts import HostLost, host_name


async def bind(state: AgentState, plan: RunPlan) -> None:
    """Open the run's workspace on a host (`workspace.open`) and record it; a sub-agent asks its
    parent's host first (the same directory), then any host."""
    if not hosts.needs_workspace(plan):
        return
    binding = None
    shadow = state.run.shadow
    if shadow is not None and shadow.workspace_ref is not None:  # a shadow: a private copy of the original's files
        binding = await _restore(state, plan, shadow.workspace_ref)
    elif state.run.workspace_host is not None:
        try:
            binding = await _open(state, plan, state.run.workspace_host)
        except HostLost:
            workflow.logger.warning("host %s did not open the workspace; any host will", state.run.workspace_host)
    if binding is None:
        binding = await _open(state, plan, None)
    state.workspace.bind(binding.host_queue, binding.manifest_ref)


async def open_on(state: AgentState, plan: RunPlan, host: str) -> WorkspaceBinding:
    """The workspace as it stands on `host` (its files' manifest): a session's turn checkpoint."""
    return await _open(state, plan, host)


async def _restore(state: AgentState, plan: RunPlan, manifest: ArtifactRef) -> WorkspaceBinding:
    """A new workspace holding the files of `manifest` (`workspace.rehydrate`), on whichever host takes it."""
    try:
        request = RehydrateWorkspace(workspace=plan.workspace, manifest_ref=manifest)
        return await calls.call(WORKSPACE_REHYDRATE, request, summary=f"restore workspace {plan.workspace}")
    except ActivityError as err:
        raise_if_cancelled(err)
        raise FailRun(f"restoring the workspace {plan.workspace} failed: {cause(err)}") from None


async def _open(state: AgentState, plan: RunPlan, host: str | None) -> WorkspaceBinding:
    try:
        request, summary = OpenWorkspace(workspace=plan.workspace), f"open workspace {plan.workspace}"
        if host is None and plan.local_activities:  # on this worker's host: read-only tools run locally
            return await calls.call(WORKSPACE_OPEN, request, summary=summary, local=True)
        return await calls.call(WORKSPACE_OPEN, request, summary=summary, **hosts.on_host(host, plan))
    except FailureError as err:  # a local activity's final failure is not wrapped in an ActivityError
        raise_if_cancelled(err)
        if host is not None and hosts.host_gone(err):
            raise HostLost(host, "open the workspace") from None
        raise FailRun(f"opening the workspace {plan.workspace} failed: {cause(err)}") from None


async def rehydrate(state: AgentState, plan: RunPlan, manifest, target: str, lost: HostLost) -> str:
    """The workspace restored from `manifest` on another host, which now holds it: the note for
    the effects the restore reverted."""
    workflow.logger.warning("%s; restoring %s on another host", lost, target)
    try:
        binding = await calls.call(
            WORKSPACE_REHYDRATE,
            RehydrateWorkspace(workspace=plan.workspace, manifest_ref=manifest),
            summary=f"step {state.step}: fail over, restore {target}",
        )
    except ActivityError as err:
        raise_if_cancelled(err)
        raise FailRun(f"{lost}; restoring {target} on another host failed: {cause(err)}") from None
    state.workspace.host = binding.host_queue
    return f"restored from {target} on host {host_name(binding.host_queue)}"


def record(
    state: AgentState,
    from_host: str | None,
    checkpoint_id: str | None,
    reason: str,
    restored: str,
    report: RollbackReport,
) -> list[str]:
    """The move in `state.workspace.failovers`: which effects the restore reverted, which were undone (returned)."""
    undone = [u for u in report.undone if not u.endswith(restored)]
    state.workspace.add_failover(
        Failover(
            step=state.step,
            at=workflow.now().isoformat(),
            from_host=from_host,
            to_host=state.workspace.host,
            checkpoint_id=checkpoint_id,
            reason=reason,
            restored=[u for u in report.undone if u.endswith(restored)],
            undone=undone,
            irreversible=list(report.irreversible),
        )
    )
    return undone
