"""Search attributes (each declared once, ratchet/contracts/search_attributes.py): a run's agent,
phase and whether it waits for a person, for `temporal workflow list --query
'RatchetPhase="AWAITING_APPROVAL"'`; a session says so (set once) with its latest turn; a run that
waits (for a person, a message, a resume) or has closed, its steps and cost; the build of its worker
deployment it is on (set once per execution); a shadow run, the run it shadows (set once); its tenant
and priority (set once); a run handed to a person, their inbox while it waits for them (unset, not
upserted, on runs never handed). Turn, steps and cost change only with the phase, so they ride on its
upserts. Only what changed is upserted, and rarely: the phase shows RUNNING while a run thinks and
acts, so a step upserts nothing (history bytes per step stay flat)."""

from __future__ import annotations

from typing import Any

from temporalio import workflow
from temporalio.common import SearchAttributeKey

from ratchet.contracts import AgentState, Phase, RunAttributes, RunPlan
from ratchet.contracts.search_attributes import WORKING
from ratchet.core.search_keys import key

SA_AGENT = key(RunAttributes.AGENT)
SA_PHASE = key(RunAttributes.PHASE)
SA_APPROVAL = key(RunAttributes.AWAITING_APPROVAL)
SA_SESSION = key(RunAttributes.SESSION)
SA_TURN = key(RunAttributes.TURN)
SA_STEPS = key(RunAttributes.STEPS)
SA_COST = key(RunAttributes.COST)
SA_BUILD = key(RunAttributes.BUILD)
SA_SHADOW_OF = key(RunAttributes.SHADOW_OF)
SA_TENANT = key(RunAttributes.TENANT)
SA_PRIORITY = key(RunAttributes.PRIORITY)
SA_HANDED_TO = key(RunAttributes.HANDED_TO)
SHOWN_PHASES = (
    Phase.AWAITING_APPROVAL,
    Phase.AWAITING_DECISION,
    Phase.AWAITING_MESSAGE,
    Phase.AWAITING_PERSON,
    Phase.PAUSED,
)
"""Phases shown as they are; the other live phases show as WORKING, "RUNNING" (terminal ones as they are)."""


def wanted(state: AgentState, plan: RunPlan | None) -> dict[SearchAttributeKey[Any], Any]:
    """The attributes the run should show now."""
    phase = state.phase if state.phase in SHOWN_PHASES or state.phase.terminal else WORKING
    values: dict[SearchAttributeKey[Any], Any] = {
        SA_AGENT: state.run.agent,
        SA_PHASE: str(phase),
        SA_APPROVAL: bool(state.calls.pending_approvals),
    }
    if plan is not None and plan.session is not None:
        values[SA_SESSION] = True
        values[SA_TURN] = state.session.turn_number
    if state.release.build is not None:
        values[SA_BUILD] = state.release.build
    if state.run.tenant is not None:  # set once (a start through ratchet.client sets them already)
        values[SA_TENANT] = state.run.tenant
    if state.run.priority is not None:
        values[SA_PRIORITY] = str(state.run.priority)
    if state.run.shadow is not None:  # set once, with the first upsert: a shadow is never listed as production
        values[SA_SHADOW_OF] = state.run.shadow.workflow_id
    waiting = state.handoffs[-1] if state.handoffs and state.handoffs[-1].waiting and not state.phase.terminal else None
    values[SA_HANDED_TO] = waiting.to_agent if waiting is not None else None  # None: unset (upserted once set)
    if phase != WORKING:  # waiting or closed: steps and cost hold until the phase changes again
        values[SA_STEPS] = state.step
        values[SA_COST] = round(state.used.cost_usd, 6)
    return values


class Visibility:
    def __init__(self) -> None:
        """Call from the workflow's `__init__`: what the run has from its start (a start through
        ratchet.client sets its agent and phase; a continuation carries its predecessor's) is taken
        as published, so only what differs from it is upserted."""
        self._published: dict[str, Any] = {
            pair.key.name: pair.value for pair in workflow.info().typed_search_attributes.search_attributes
        }
        self._shown = SA_PHASE.name in self._published
        """The run shows a phase from its start: what it shows is kept true (its end, above all),
        even on a worker that publishes none of its own (RATCHET_SEARCH_ATTRIBUTES off on the
        worker, on on the client that started it), or it would be listed RUNNING forever."""

    def publish(self, state: AgentState, plan: RunPlan | None, search_attributes: bool | None = None) -> None:
        """Upsert what changed. Without a plan (a run that failed while being planned),
        `search_attributes` says whether the worker has them (run.prepare's failure tells)."""
        if not (self._shown or (plan.search_attributes if plan is not None else search_attributes)):
            return
        changed = [(key, value) for key, value in wanted(state, plan).items() if self._published.get(key.name) != value]
        if not changed:
            return
        self._published.update((key.name, value) for key, value in changed)
        workflow.upsert_search_attributes(
            [key.value_set(value) if value is not None else key.value_unset() for key, value in changed]
        )
