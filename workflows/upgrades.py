"""Which build of its worker deployment a run is on, and a session's move to a new build
(deterministic, no I/O; docs/OPERATIONS.md, "Deploying a new version").

Every run is PINNED to the build it started on (ratchet/deploys/joining.py): its history is only
ever replayed by the code that wrote it, so no deploy can make it non-deterministic. A one-shot run
finishes where it started, however long it waits. A session (unless its `upgrade` is `never`)
moves at a turn boundary once the deployment's build for it has changed (the server says so on
each workflow task): it continues as new with Upgrade-on-Continue-as-New, conversation,
checkpoints, memory scope and stream carried in the `Continuation`, and the next turn runs on the
new build (workflows/turns.py, `move`). Its other continue-as-news (every `turns_per_run` turns)
upgrade the same way (workflows/handover.py).
"""

from __future__ import annotations

from temporalio import workflow

from ratchet.contracts import AgentState, RunPlan, Upgrade


def record(state: AgentState) -> None:
    """The build running this execution joins `state.release.builds` (nothing without versioning)."""
    version = workflow.info().get_current_deployment_version()
    if version is not None:
        state.release.ran_on(version.build_id)


def may_upgrade(plan: RunPlan) -> bool:
    """Its continue-as-news move it to the deployment's current (or ramping) build: a session that
    has not opted out, on a versioned worker."""
    session = plan.session
    return (
        session is not None
        and session.upgrade == Upgrade.AT_TURNS
        and workflow.info().get_current_deployment_version() is not None
    )


def due(plan: RunPlan) -> bool:
    """A session between turns whose deployment now sends it to another build."""
    return may_upgrade(plan) and workflow.info().is_target_worker_deployment_version_changed()
