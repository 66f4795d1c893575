"""Older effects leave the handover: a long run's continue-as-new input stays flat.

Effects below the last checkpoint are needed only by a rollback to an earlier checkpoint, by
`rollback_all` and by a rollback of the closed run. At each continue-as-new (`archive`) they go to
the artifact store (activities/effects_archive.py): `state.effects.stack` (a `Window`) then starts
at the first effect still held, and `state.effects.archive` names the newest segment. A rollback
whose boundary lies below the window first `restore`s them, so compensation always sees every
effect it undoes, in order. Sub-agents keep all theirs: their result hands them to the parent.
"""

from __future__ import annotations

from collections.abc import Callable

from temporalio import workflow

from ratchet.contracts import AgentState, ArchiveEffects, Effect, EffectStatus
from ratchet.contracts.activities import EFFECTS_ARCHIVE, EFFECTS_LOAD
from . import calls


async def archive(state: AgentState, undoable: Callable[[Effect], bool]) -> None:
    """Before a continue-as-new: move the effects below the last checkpoint to the archive
    (`undoable`: saga.undoable for the run's plan, to count what the archive leaves in place)."""
    if workflow.info().parent is not None or not state.effects.checkpoints.items:
        return
    effects = state.effects
    boundary = effects.checkpoints.items[-1].effects_len
    moving = effects.stack.items[: effects.stack.local(boundary)]
    if not moving:
        return
    effects.archive = await calls.call(
        EFFECTS_ARCHIVE,
        ArchiveEffects(effects=moving, prev=effects.archive),
        summary=f"archive {len(moving)} effects",
    )
    effects.stack.drop_before(boundary)
    effects.archived_left += sum(1 for e in moving if undoable(e) and e.status != EffectStatus.UNDONE)


async def restore(state: AgentState, boundary: int) -> None:
    """Before undoing down to effect number `boundary`: bring archived effects back if it needs them."""
    effects = state.effects
    if boundary >= effects.stack.base or effects.archive is None:
        return
    archived = await calls.call(EFFECTS_LOAD, effects.archive, summary=f"load {effects.stack.base} archived effects")
    effects.unarchive(archived)
