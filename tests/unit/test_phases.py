"""The transition table (workflows/phases.py): which phase changes a run may make, and that a
change goes through one writer (pure: no server; visibility and the stream are local doubles)."""

import ast
from pathlib import Path

import pytest

from ratchet.contracts import STATE_VERSION, TERMINAL_PHASES, AgentRun, AgentState, Phase
from ratchet.contracts.events import PhaseChanged
from ratchet.workflows import phases
from ratchet.workflows.phases import ENTERED_FROM, IllegalTransition, Phases, allowed

P = Phase
WORKFLOWS = Path(phases.__file__).parent


class Published:
    """Stands in for the search attributes and the run's stream: what each change published."""

    def __init__(self) -> None:
        self.upserts: list[Phase] = []
        self.events: list[PhaseChanged] = []

    def publish(self, event) -> None:  # RunStream.publish
        self.events.append(event)


class Visibility:
    def __init__(self, seen: Published) -> None:
        self.seen = seen

    def publish(self, state, plan, search_attributes=None) -> None:
        self.seen.upserts.append(state.phase)


def table() -> tuple[Phases, Published, AgentState]:
    seen = Published()
    state = AgentState(v=STATE_VERSION, workflow_id="w", run=AgentRun(agent="a", objective="o"))
    return Phases(Visibility(seen), seen), seen, state  # type: ignore[arg-type]  # local doubles


def test_every_phase_is_in_the_table():
    assert set(ENTERED_FROM) == set(Phase)


@pytest.mark.parametrize(
    "old,new",
    [
        (P.STARTING, P.THINKING),
        (P.THINKING, P.ACTING),
        (P.ACTING, P.THINKING),
        (P.ACTING, P.AWAITING_APPROVAL),
        (P.AWAITING_APPROVAL, P.AWAITING_DECISION),
        (P.AWAITING_APPROVAL, P.ACTING),
        (P.THINKING, P.AWAITING_MESSAGE),
        (P.AWAITING_MESSAGE, P.THINKING),
        (P.AWAITING_MESSAGE, P.ROLLING_BACK),
        (P.ACTING, P.PAUSED),
        (P.STARTING, P.FAILED),
        (P.ROLLING_BACK, P.COMPENSATION_FAILED),
        (P.COMPENSATION_FAILED, P.ROLLING_BACK),  # the failure policy after a rollback that failed
        (P.AWAITING_MESSAGE, P.ACTING),  # a failover while a session waits
        (P.PAUSED, P.CANCELLED),
    ],
)
def test_the_changes_a_run_makes_are_allowed(old, new):
    assert allowed(old, new)


@pytest.mark.parametrize(
    "old,new",
    [
        (P.THINKING, P.AWAITING_APPROVAL),  # approvals are asked while acting
        (P.STARTING, P.AWAITING_DECISION),
        (P.PAUSED, P.THINKING),  # a pause goes back to what it interrupted
        (P.ROLLING_BACK, P.THINKING),
        (P.ACTING, P.STARTING),
        (P.DONE, P.THINKING),
        (P.CANCELLED, P.DONE),
        (P.COMPENSATION_FAILED, P.DONE),
    ],
)
def test_changes_no_run_makes_are_refused(old, new):
    assert not allowed(old, new)


@pytest.mark.parametrize("terminal", sorted(TERMINAL_PHASES - {P.COMPENSATION_FAILED}))
def test_a_terminal_phase_is_final(terminal):
    assert not any(allowed(terminal, new) for new in Phase if new != terminal)


def test_interrupting_phases_go_back_to_what_they_interrupted():
    assert allowed(P.PAUSED, P.AWAITING_MESSAGE, back=True)
    assert allowed(P.ROLLING_BACK, P.AWAITING_APPROVAL, back=True)
    assert allowed(P.AWAITING_DECISION, P.AWAITING_APPROVAL, back=True)
    # a decision waited while another call's approval ended (ACTING): the decision's end goes back
    assert allowed(P.ACTING, P.AWAITING_APPROVAL, back=True)
    assert not allowed(P.THINKING, P.PAUSED, back=True), "only an interrupting phase goes back"
    assert not allowed(P.PAUSED, P.DONE, back=True), "going back never ends a run"


def test_a_change_publishes_the_stream_event_and_the_search_attributes():
    table_, seen, state = table()
    assert table_.enter(state, P.THINKING) == P.STARTING
    previous = table_.enter(state, P.PAUSED)
    table_.back(state, previous)
    table_.enter(state, P.THINKING)  # the same phase: no event, the attributes checked again
    table_.enter(state, P.DONE)
    assert [e.phase for e in seen.events] == [P.THINKING, P.PAUSED, P.THINKING], "the end is RunEnded's"
    assert seen.upserts == [P.THINKING, P.PAUSED, P.THINKING, P.THINKING, P.DONE]
    assert state.phase == P.DONE


def test_a_change_outside_the_table_raises_and_leaves_the_phase():
    table_, seen, state = table()
    with pytest.raises(IllegalTransition, match="STARTING -> AWAITING_APPROVAL"):
        table_.enter(state, P.AWAITING_APPROVAL)
    assert state.phase == P.STARTING and not seen.events and not seen.upserts


def test_no_workflow_module_but_the_table_assigns_the_phase_or_publishes_visibility():
    offenders = []
    for path in sorted(WORKFLOWS.glob("*.py")):
        if path.name in ("phases.py", "visibility.py"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
            for target in targets:
                for element in target.elts if isinstance(target, ast.Tuple) else [target]:
                    if isinstance(element, ast.Attribute) and element.attr == "phase":
                        offenders.append(f"{path.name}:{node.lineno} assigns .phase")
            if isinstance(node, ast.Attribute) and node.attr == "publish" and "visibility" in ast.unparse(node.value):
                offenders.append(f"{path.name}:{node.lineno} {ast.unparse(node)}")
    assert offenders == []
