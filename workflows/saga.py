"""Compensation: undo the effects above a boundary, newest first (workflow-side, deterministic).

Each undo runs as activity `undo.<tool>` with key `{key}/undo` and its own retry policy; the undo of
a workspace tool on the host holding the workspace (workflows/hosts.py). When an undo finally
fails, compensation stops there: the failed effect and every older one above the boundary are
marked and reported, never dropped, because undoing an older effect underneath a newer one that is
still in place could corrupt the target.
"""

from __future__ import annotations

from dataclasses import replace

from temporalio.exceptions import ActivityError

from ratchet.contracts import (
    AgentState,
    Effect,
    EffectClass,
    EffectStatus,
    RollbackReport,
    RunPlan,
    UndoInvocation,
)
from ratchet.contracts.activities import UNDO
from ratchet.contracts.rollback_plan import is_child, rollback_plan as rollback_plan, undoable
from . import calls, hosts
from .errors import cause
from .hosts import HostLost


def mark_restored(state: AgentState, plan: RunPlan, boundary: int, restored: str, report: RollbackReport) -> None:
    """The workspace was restored to the boundary (a failover, workflows/failover.py): the
    compensable workspace effects above it, a sub-agent's among them, are reverted already. Marked
    undone (with the note `restored`), `compensate` runs no undo for them."""
    for effect in reversed(state.effects.stack.items[state.effects.stack.local(boundary) :]):
        if effect.status == EffectStatus.UNDONE:
            continue
        if _restored_by_files(effect):
            effect.status = EffectStatus.UNDONE
            report.undone.append(f"{_label(effect)}: {restored}")
        elif is_child(plan, effect):
            for child_effect in (effect.undo or {}).get("effects", []):
                if _restored_by_files(Effect.model_validate(child_effect)):
                    child_effect["status"] = EffectStatus.UNDONE.value


async def compensate(state: AgentState, plan: RunPlan, boundary: int, report: RollbackReport) -> RollbackReport:
    """Undo the run's effects from number `boundary` on (none of them archived: the caller
    restores them first, workflows/effects_archive.py), newest first. On a clean run the effects above the
    boundary are removed from the stack (the report keeps what was done). An undo whose workspace
    host is gone raises HostLost (the effects keep their status; the caller fails over or gives up)."""
    stack = state.effects.stack
    pending = list(reversed(stack.items[stack.local(boundary) :]))  # none of them archived
    for index, effect in enumerate(pending):
        if effect.status == EffectStatus.UNDONE:
            continue
        if not undoable(plan, effect):
            effect.status = EffectStatus.NOT_UNDONE
            effect.error = "irreversible: left in place"
            report.irreversible.append(_label(effect))
            continue
        try:
            await _undo(state, plan, effect)
        except ActivityError as err:
            if hosts.host_gone(err):  # only workspace activities have a schedule-to-start timeout
                raise HostLost(state.workspace.host, f"undo step {effect.step} {effect.tool}") from None
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
    stack.cut_at(boundary)
    return report


UNDO_TARGETS = ("path", "ticket_id", "id", "key", "name", "title")
"""Arguments that name what a call acted on, for an undo's summary when the tool recorded no description."""


def undo_summary(effect: Effect) -> str:
    """The undo activity's summary in the Temporal Web UI: the step, the tool and what the undo
    does to which file or ticket, in the tool's words (`undo step 3: write_file: restore
    src/app.py (181 bytes)`, `undo step 4: create_ticket: delete ticket #12 (...)`); without the
    tool's words (the call never reported), the argument that names the target."""
    what = effect.undo_description
    if what is None:
        what = next((str(effect.arguments[k]) for k in UNDO_TARGETS if effect.arguments.get(k) is not None), "")
    return f"undo step {effect.step}: {effect.tool}" + (f": {what}" if what else "")[:200]


async def _undo(
    state: AgentState, plan: RunPlan, effect: Effect, workspace: str | None = None, host: str | None = None
) -> None:
    spec = plan.tool(effect.tool)
    if spec is not None and spec.kind == "child":
        await _undo_child(state, plan, effect)
        return
    host = host or state.workspace.host
    await calls.call(
        replace(UNDO, name=f"undo.{effect.tool}"),
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
        summary=undo_summary(effect),
        **hosts.on_host(host if effect.workspace else None, plan),  # a workspace undo: on its host
    )


async def _undo_child(state: AgentState, plan: RunPlan, effect: Effect) -> None:
    """Undo what a finished sub-agent left in place, newest first, in its workspace (the parent's
    directory, on the host the child last held it). A child that did not finish (failed or
    cancelled) compensated its own effects by its failure policy. After a failover its workspace
    effects were reverted with the parent's workspace (`mark_restored`)."""
    info = effect.undo or {}
    for child_effect in reversed([Effect.model_validate(e) for e in info.get("effects", [])]):
        if child_effect.status == EffectStatus.UNDONE:
            continue
        await _undo(state, plan, child_effect, workspace=info.get("workspace"), host=info.get("workspace_host"))


def _restored_by_files(effect: Effect) -> bool:
    return effect.workspace and effect.effect == EffectClass.COMPENSABLE


def _label(effect: Effect) -> str:
    return f"step {effect.step} {effect.tool} ({effect.key})"
