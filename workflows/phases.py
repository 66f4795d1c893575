"""The run's phase: its transition table, and what a change publishes (deterministic, no I/O).

Every change of `state.phase` goes through `Phases` (nothing else assigns it): the change is
checked against `ENTERED_FROM`, the search attributes are upserted when what they show changed
(workflows/visibility.py: `RatchetPhase` shows the working phases as RUNNING, so a step upserts
nothing), and the run's stream gets a `PhaseChanged` step event (a terminal phase is the stream's
`RunEnded`, published with the answer by workflows/events.py).

Four phases interrupt another and go back to it when they end (`back`): ROLLING_BACK (an undo),
PAUSED, AWAITING_PERSON (a handoff to a person's inbox, until they answer), and AWAITING_DECISION (a
call whose outcome is unknown; another call of the same reply may have moved the phase on meanwhile,
e.g. an approval that ended: it goes back from there). A change the table does not allow is a bug in
the workflow: it raises `IllegalTransition`, which fails the workflow task (retried, so a fixed
worker takes the run on from there) rather than leaving the state wrong."""

from __future__ import annotations

from ratchet.contracts import TERMINAL_PHASES, AgentState, Phase, RunPlan
from ratchet.contracts.events import PhaseChanged

from .events import RunStream
from .visibility import Visibility

P = Phase
LIVE = frozenset(Phase) - TERMINAL_PHASES
WORKING = frozenset({P.STARTING, P.THINKING, P.ACTING, P.AWAITING_APPROVAL, P.AWAITING_DECISION, P.AWAITING_MESSAGE})
CALLS = frozenset({P.ACTING, P.AWAITING_APPROVAL, P.AWAITING_DECISION})
"""The phases of a step's tool calls: its calls may wait for approvals and decisions at once."""
INTERRUPTING = frozenset({P.ROLLING_BACK, P.PAUSED, P.AWAITING_DECISION, P.AWAITING_PERSON})
"""Phases that go `back` to the phase they interrupted when they end."""

ENTERED_FROM: dict[Phase, frozenset[Phase]] = {
    P.STARTING: frozenset(),
    P.THINKING: frozenset({P.STARTING, P.THINKING, P.ACTING, P.AWAITING_MESSAGE}),
    # a reply's calls; the end of an approval wait or of an interrupted reply; a failover from anywhere
    P.ACTING: LIVE | {P.COMPENSATION_FAILED},
    P.AWAITING_APPROVAL: CALLS,
    P.AWAITING_DECISION: CALLS,
    P.AWAITING_MESSAGE: WORKING,
    P.AWAITING_PERSON: WORKING,  # between steps: a handoff to a person's inbox (workflows/handoffs.py)
    P.PAUSED: WORKING,
    # a rollback, a failed verification's revert, the failure policy (again after an undo that
    # failed: the policy's own undo comes after a rollback's that did not complete)
    P.ROLLING_BACK: LIVE | {P.COMPENSATION_FAILED},
    P.DONE: LIVE,
    P.FAILED: LIVE,
    P.BUDGET_EXHAUSTED: LIVE,
    P.CANCELLED: LIVE,
    P.ROLLED_BACK: LIVE,
    P.COMPENSATION_FAILED: LIVE | {P.COMPENSATION_FAILED},
}
"""Phase -> the phases it may be entered from (besides going `back` from an interrupting phase)."""


class IllegalTransition(RuntimeError):
    """A phase change the table does not allow: a bug in the workflow, not in the run."""


def allowed(old: Phase, new: Phase, back: bool = False) -> bool:
    """Whether the run may go from `old` to `new` (`back`: an interrupting phase ends, returning
    to the phase it interrupted)."""
    if old == new:
        return True
    if back:  # a call's phase may have changed meanwhile: its reply's other calls wait too
        return old in INTERRUPTING | CALLS and (new in LIVE or new == P.COMPENSATION_FAILED)
    return old in ENTERED_FROM[new]


class Phases:
    """The one writer of `state.phase`. Made in the workflow's `__init__` with what a change publishes."""

    def __init__(self, visibility: Visibility, stream: RunStream | None = None) -> None:
        self.visibility = visibility
        self._stream = stream

    def enter(self, state: AgentState, phase: Phase, plan: RunPlan | None = None) -> Phase:
        """Change to `phase`; the phase before it (to go `back` to)."""
        return self._change(state, phase, plan, back=False)

    def back(self, state: AgentState, phase: Phase, plan: RunPlan | None = None) -> None:
        """An interrupting phase (ROLLING_BACK, PAUSED, AWAITING_DECISION) ends: back to `phase`."""
        self._change(state, phase, plan, back=True)

    def publish(self, state: AgentState, plan: RunPlan | None = None, search_attributes: bool | None = None) -> None:
        """Upsert the search attributes that changed without a change of phase (a session's turn)."""
        self.visibility.publish(state, plan if plan is not None else state.plan, search_attributes)

    def _change(self, state: AgentState, phase: Phase, plan: RunPlan | None, back: bool) -> Phase:
        old = state.phase
        if not allowed(old, phase, back):
            raise IllegalTransition(f"phase {old} -> {phase}{' (back)' if back else ''} is not in the table")
        state.phase = phase
        if phase != old and self._stream is not None and not phase.terminal:
            self._stream.publish(PhaseChanged(step=state.step, phase=phase))
        self.publish(state, plan)
        return old
