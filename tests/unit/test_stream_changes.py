"""What the run's event stream publishes of a state's tool call records (workflows/events.py
`_Seen`): each record once, however the newest reply's records were put in order again between two
looks; a look reads from the newest step's records on, not from the run's first call."""

from ratchet.contracts import STATE_VERSION, AgentRun, AgentState, ToolCallRecord, ToolResult
from ratchet.contracts.events import ToolCallFinished
from ratchet.workflows import events


def new_state() -> AgentState:
    return AgentState(v=STATE_VERSION, workflow_id="w", run=AgentRun(agent="a", objective="o"))


def record(step: int, call_id: str) -> ToolCallRecord:
    return ToolCallRecord(
        step=step,
        call_id=call_id,
        tool="t",
        key=f"w/{step}/{call_id}",
        arguments="{}",
        result=ToolResult(ok=True, output=call_id),
    )


def finished(seen: events._Seen, state: AgentState) -> list[str]:
    return [e.call for e in seen.changes(state) if isinstance(e, ToolCallFinished)]


def test_records_put_in_order_after_a_look_are_each_published_once():
    state = new_state()
    seen = events._Seen(state)
    state.calls.record(record(1, "a"))
    state.calls.record(record(1, "b"))
    assert finished(seen, state) == ["a", "b"]
    # an interrupted reply: its last call answered and the reply's records put in its order at once
    state.calls.record(record(1, "c"))
    state.calls.in_order(0, ["c", "a", "b"])
    assert [r.call_id for r in state.calls.tool_calls.items] == ["c", "a", "b"]
    assert finished(seen, state) == ["c"]
    state.calls.record(record(2, "d"))
    assert finished(seen, state) == ["d"]
    assert finished(seen, state) == []


def test_a_look_reads_from_the_newest_steps_records_on():
    state = new_state()
    for step in range(1, 201):
        state.calls.record(record(step, "a"))
    seen = events._Seen(state)  # a continuation's: what it holds was published before
    assert seen.settled == 199  # the newest step's record may still move
    state.calls.record(record(201, "a"))
    state.calls.record(record(201, "b"))
    state.calls.drop_records_before(150)  # a handover dropped the oldest
    assert finished(seen, state) == ["a", "b"]
    assert seen.settled == 200
    assert [r.step for r in state.calls.tool_calls.since(seen.settled)] == [201, 201]
