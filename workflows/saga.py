"""Compensation: undo the effects above a boundary, newest first (workflow-side, deterministic).

Each undo runs as activity `undo.<tool>` with key `{key}/undo` and its own retry policy; the undo of
a workspace tool on the host holding the workspace (workflows/hosts.py). When an undo finally
fails, compensation stops there: the failed effect and every older one above the boundary are
marked and reported, never dropped, because undoing an older effect underneath a newer one that is
still in place could corrupt the target.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

from ratchet.contracts import (
    AgentState,
    Effect,
    EffectClass,
    EffectStatus,
    RollbackPlanItem,
    RollbackReport,
    RunPlan,
    UndoInvocation,
)
from . import hosts
from .errors import cause
from .hosts import HostLost

UNDO_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=500),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=10),
    maximum_attempts=10,
)
"""About a minute of attempts: an outage of the ledger or the artifact store (a file's old bytes) is
waited out, not turned into COMPENSATION_FAILED."""


def undoable(plan: RunPlan, effect: Effect) -> bool:
    if _is_child(plan, effect):
        return True
    spec = plan.tool(effect.tool)
    return effect.effect == EffectClass.COMPENSABLE and spec is not None and spec.has_undo


def rollback_plan(state: AgentState, plan: RunPlan, boundary: int) -> list[RollbackPlanItem]:
    """What undoing the run's effects from number `boundary` on does, newest first (the dry run of
    `compensate`). Archived effects below `state.effects_base` show as one `archived` item."""
    items = []
    for effect in reversed(state.effects[max(boundary - state.effects_base, 0) :]):
        if effect.status == EffectStatus.UNDONE:
            action = "already_undone"
        else:
            action = "undo" if undoable(plan, effect) else "irreversible"
        items.append(
            RollbackPlanItem(
                tool=effect.tool,
                step=effect.step,
                key=effect.key,
                action=action,
                description=describe(plan, effect),
            )
        )
    if boundary < state.effects_base:
        items.append(
            RollbackPlanItem(
                tool="(archived)",
                step=0,
                key=state.effects_archive or "",
                action="archived",
                description=f"{state.effects_base - boundary} earlier effects, kept in the artifact store: "
                "the rollback loads them and undoes them, newest first",
            )
        )
    return items


def describe(plan: RunPlan, effect: Effect) -> str | None:
    """What undoing `effect` does, for people: the tool's words from its undo record; for a
    sub-agent, how many effects it left in place."""
    if not _is_child(plan, effect):
        return effect.undo_description
    info = effect.undo or {}
    count = len(info.get("effects", []))
    return f"undo the {count} effect{'' if count == 1 else 's'} sub-agent {info.get('child_id', '?')} left in place"


def _is_child(plan: RunPlan, effect: Effect) -> bool:
    spec = plan.tool(effect.tool)
    return spec is not None and spec.kind == "child"


async def compensate(
    state: AgentState,
    plan: RunPlan,
    boundary: int,
    report: RollbackReport,
    restored: str | None = None,
    fail_over: bool = False,
) -> RollbackReport:
    """Undo the run's effects from number `boundary` on (none of them archived: the caller
    restores them first, workflows/effects_archive.py), newest first. On a clean run the effects above the
    boundary are removed from the stack (the report keeps what was done).

    `restored`: the workspace was restored to the boundary (a failover, workflows/failover.py), so
    compensable workspace effects are reverted already: marked undone with this note, no undo runs.
    `fail_over`: an undo whose workspace host is gone raises `HostLost` (the caller fails over; the
    effects keep their status) instead of counting as an undo that failed."""
    assert boundary >= state.effects_base, "restore archived effects before compensating them"
    boundary -= state.effects_base  # where effect number `boundary` is in state.effects
    pending = list(reversed(state.effects[boundary:]))
    for index, effect in enumerate(pending):
        if effect.status == EffectStatus.UNDONE:
            continue
        if restored is not None and effect.workspace and effect.effect == EffectClass.COMPENSABLE:
            effect.status = EffectStatus.UNDONE
            report.undone.append(f"{_label(effect)}: {restored}")
            continue
        if not undoable(plan, effect):
            effect.status = EffectStatus.NOT_UNDONE
            effect.error = "irreversible: left in place"
            report.irreversible.append(_label(effect))
            continue
        try:
            await _undo(state, plan, effect, restored=restored)
        except ActivityError as err:
            if fail_over and hosts.host_gone(err):  # only workspace activities have a schedule-to-start timeout
                raise HostLost(state.workspace_host, f"undo step {effect.step} {effect.tool}") from None
            effect.status = EffectStatus.UNDO_FAILED
            effect.error = cause(err)
            report.errors.append(f"{_label(effect)}: {effect.error}")
            report.not_undone.append(_label(effect))
            for older in pending[index + 1 :]:
                if older.status != EffectStatus.UNDONE:
                    older.status = EffectStatus.NOT_UNDONE
                    older.error = f"not attempted: the undo of {_label(effect)} failed"
                    report.not_undone.append(_label(older))
            return report
        effect.status = EffectStatus.UNDONE
        report.undone.append(_label(effect))
    del state.effects[boundary:]
    return report


async def _undo(
    state: AgentState,
    plan: RunPlan,
    effect: Effect,
    workspace: str | None = None,
    host: str | None = None,
    restored: str | None = None,
) -> None:
    spec = plan.tool(effect.tool)
    if spec is not None and spec.kind == "child":
        await _undo_child(state, plan, effect, restored)
        return
    host = host or state.workspace_host
    await workflow.execute_activity(
        f"undo.{effect.tool}",
        UndoInvocation(
            key=effect.key,
            workflow_id=state.workflow_id,
            step=effect.step,
            call_id=effect.call_id,
            tool=effect.tool,
            arguments=effect.arguments,
            workspace=workspace or plan.workspace,
            undo=effect.undo,
        ),
        result_type=str,
        start_to_close_timeout=timedelta(seconds=60),
        retry_policy=UNDO_RETRY,
        heartbeat_timeout=timedelta(seconds=20),
        summary=f"undo step {effect.step}: {effect.tool}",
        **hosts.on_host(host if effect.workspace else None, plan),  # a workspace undo: on its host
    )


async def _undo_child(state: AgentState, plan: RunPlan, effect: Effect, restored: str | None = None) -> None:
    """Undo what a finished sub-agent left in place, newest first, in its workspace (the parent's
    directory, on the host the child last held it). A child that did not finish (failed or
    cancelled) compensated its own effects by its failure policy. After a failover (`restored`)
    the child's workspace effects were reverted with the parent's workspace."""
    info = effect.undo or {}
    for child_effect in reversed([Effect.model_validate(e) for e in info.get("effects", [])]):
        if child_effect.status == EffectStatus.UNDONE:
            continue
        if restored is not None and child_effect.workspace and child_effect.effect == EffectClass.COMPENSABLE:
            continue
        await _undo(state, plan, child_effect, workspace=info.get("workspace"), host=info.get("workspace_host"))


def _label(effect: Effect) -> str:
    return f"step {effect.step} {effect.tool} ({effect.key})"
