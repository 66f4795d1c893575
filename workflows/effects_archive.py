"""Older effects leave the handover: a long run's continue-as-new input stays flat.

Effects below the last checkpoint are needed only by a rollback to an earlier checkpoint, by
`rollback_all` and by a rollback of the closed run. At each continue-as-new (`archive`) they go to
the artifact store (activities/effects_archive.py) and the state keeps `effects_base` (how many)
and `effects_archive` (the newest segment's digest); `state.effects` holds the rest, so effect
number `i` of the run is `state.effects[i - effects_base]`. A rollback whose boundary lies below
`effects_base` first `restore`s them, so compensation always sees every effect it undoes, in order.
Sub-agents keep all theirs: their result hands them to the parent.
"""

from __future__ import annotations

from collections.abc import Callable

from temporalio import workflow

from ratchet.contracts import AgentState, ArchiveEffects, Effect, EffectStatus
from ratchet.contracts.activities import EFFECTS_ARCHIVE, EFFECTS_LOAD
from . import calls


def local(state: AgentState, boundary: int) -> int:
    """Where effect number `boundary` of the run is in `state.effects` (it must not be archived)."""
    assert boundary >= state.effects_base, f"effects below {state.effects_base} are archived; restore first"
    return boundary - state.effects_base


def count(state: AgentState) -> int:
    """How many effects the run has recorded, the archived ones included."""
    return state.effects_base + len(state.effects)


async def archive(state: AgentState, undoable: Callable[[Effect], bool]) -> None:
    """Before a continue-as-new: move the effects below the last checkpoint to the archive
    (`undoable`: saga.undoable for the run's plan, to count what the archive leaves in place)."""
    if workflow.info().parent is not None or not state.checkpoints:
        return
    cut = local(state, state.checkpoints[-1].effects_len)
    if cut == 0:
        return
    moving = state.effects[:cut]
    state.effects_archive = await calls.call(
        EFFECTS_ARCHIVE,
        ArchiveEffects(effects=moving, prev=state.effects_archive),
        summary=f"archive {cut} effects",
    )
    state.effects_base += cut
    state.effects_archived_left += sum(1 for e in moving if undoable(e) and e.status != EffectStatus.UNDONE)
    del state.effects[:cut]


async def restore(state: AgentState, boundary: int) -> None:
    """Before undoing down to effect number `boundary`: bring archived effects back if it needs them."""
    if boundary >= state.effects_base or state.effects_archive is None:
        return
    archived = await calls.call(
        EFFECTS_LOAD, state.effects_archive, summary=f"load {state.effects_base} archived effects"
    )
    state.unarchive(archived)
