"""Search attributes: a run's agent, phase and whether it waits for a person, for
`temporal workflow list --query 'RatchetPhase="AWAITING_APPROVAL"'`. Upserted only when they change."""

from __future__ import annotations

from temporalio import workflow
from temporalio.common import SearchAttributeKey

from ratchet.contracts import AgentState, Phase, RunPlan

SA_AGENT = SearchAttributeKey.for_keyword("RatchetAgent")
SA_PHASE = SearchAttributeKey.for_keyword("RatchetPhase")
SA_APPROVAL = SearchAttributeKey.for_bool("RatchetAwaitingApproval")
SHOWN_PHASES = (Phase.AWAITING_APPROVAL, Phase.AWAITING_DECISION, Phase.AWAITING_MESSAGE, Phase.PAUSED)
"""Phases shown as they are; the other live phases show as RUNNING (terminal ones as they are)."""


class Visibility:
    def __init__(self) -> None:
        self._published: tuple[str, str, bool] | None = None

    def publish(self, state: AgentState, plan: RunPlan | None, search_attributes: bool | None = None) -> None:
        """Upsert what changed. Without a plan (a run that failed while being planned),
        `search_attributes` says whether the worker has them (run.prepare's failure tells)."""
        if not (plan.search_attributes if plan is not None else search_attributes):
            return
        phase = state.phase if state.phase in SHOWN_PHASES or state.phase.terminal else "RUNNING"
        wanted = (state.run.agent, str(phase), bool(state.pending_approvals))
        if wanted == self._published:
            return
        self._published = wanted
        workflow.upsert_search_attributes(
            [SA_AGENT.value_set(wanted[0]), SA_PHASE.value_set(wanted[1]), SA_APPROVAL.value_set(wanted[2])]
        )
