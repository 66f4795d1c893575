"""What a rollback would undo, read off a run's state: pure functions over the contracts, shared by
the workflow (its `rollback_plan` query, workflows/rollback.py and workflows/saga.py) and the client
(a plan with a long run's archived effects listed one by one, ratchet/client/rollback.py)."""

from __future__ import annotations

from dataclasses import dataclass

from ratchet.contracts.base import EffectClass
from ratchet.contracts.plan import RunPlan
from ratchet.contracts.records import Checkpoint, Effect, EffectStatus, RollbackPlanItem
from ratchet.contracts.rollback import TO_START
from ratchet.contracts.state import AgentState


@dataclass(frozen=True)
class Target:
    """Where a rollback goes back to: a checkpoint, or None for the run's start (every effect)."""

    checkpoint: Checkpoint | None

    @property
    def id(self) -> str | None:
        return self.checkpoint.id if self.checkpoint is not None else None

    @property
    def since(self) -> int:
        """The effect boundary: how many effects the run had at the target."""
        return self.checkpoint.effects_len if self.checkpoint is not None else 0

    @property
    def name(self) -> str:
        return self.checkpoint.id if self.checkpoint is not None else "the start"


START = Target(None)


def resolve(state: AgentState, checkpoint_id: str) -> Target:
    """The checkpoint `checkpoint_id` of the run (`start`: the run's start); an unknown id is the
    caller's mistake (ValueError naming the ones there are)."""
    if checkpoint_id == TO_START:
        return START
    for checkpoint in state.effects.checkpoints.items:
        if checkpoint.id == checkpoint_id:
            return Target(checkpoint)
    known = ", ".join(c.id for c in state.effects.checkpoints.items) or "none yet"
    dropped = (
        f"; the first {state.effects.checkpoints.base} checkpoints (turns up to {state.session.turns.base}) "
        "are no longer held"
        if state.effects.checkpoints.base
        else ""
    )
    raise ValueError(
        f"unknown checkpoint {checkpoint_id!r}; this run has: {known} (or {TO_START!r}: every effect){dropped}"
    )


def plan_of(state: AgentState, checkpoint_id: str) -> list[RollbackPlanItem]:
    """The dry run: what a rollback to `checkpoint_id` would undo, newest first."""
    assert state.plan is not None, "a run is planned before it has effects"
    return rollback_plan(state, state.plan, resolve(state, checkpoint_id).since)


def undoable(plan: RunPlan, effect: Effect) -> bool:
    if is_child(plan, effect):
        return True
    spec = plan.tool(effect.tool)
    return effect.effect == EffectClass.COMPENSABLE and spec is not None and spec.has_undo


def rollback_plan(state: AgentState, plan: RunPlan, boundary: int) -> list[RollbackPlanItem]:
    """What undoing the run's effects from number `boundary` on does, newest first (the dry run of
    `compensate`). Archived effects (below the stack's window) show as one `archived` item."""
    items = []
    for effect in reversed(state.effects.stack.since(boundary)):
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
                turn=effect.turn,
                description=describe(plan, effect),
            )
        )
    if boundary < state.effects.stack.base:
        items.append(
            RollbackPlanItem(
                tool="(archived)",
                step=0,
                key=state.effects.archive or "",
                action="archived",
                description=f"{state.effects.stack.base - boundary} earlier effects, kept in the artifact store: "
                "the rollback loads them and undoes them, newest first",
            )
        )
    return items


def describe(plan: RunPlan, effect: Effect) -> str | None:
    """What undoing `effect` does, for people: the tool's words from its undo record; for a
    sub-agent, how many effects it left in place."""
    if not is_child(plan, effect):
        return effect.undo_description
    info = effect.undo or {}
    count = len(info.get("effects", []))
    return f"undo the {count} effect{'' if count == 1 else 's'} sub-agent {info.get('child_id', '?')} left in place"


def is_child(plan: RunPlan, effect: Effect) -> bool:
    spec = plan.tool(effect.tool)
    return spec is not None and spec.kind == "child"
