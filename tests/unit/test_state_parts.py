"""AgentState's parts (ratchet/contracts/state.py) and the session's handover cut
(workflows/sessions.py `trim`): pure, no server."""

from ratchet.contracts import (
    STATE_VERSION,
    AgentRun,
    AgentState,
    Checkpoint,
    Effect,
    EffectClass,
    Message,
    OutcomeChoice,
    OutcomeDecision,
    PendingDecision,
    ToolCallRecord,
    ToolResult,
    Turn,
    TurnStatus,
)
from ratchet.workflows import sessions


def new_state() -> AgentState:
    return AgentState(v=STATE_VERSION, workflow_id="w", run=AgentRun(agent="a", objective="o"))


def checkpoint(name: str, turn: int = 0, messages_len: int = 0) -> Checkpoint:
    return Checkpoint(
        id=name, step=1, created_at="t", effects_len=0, messages_len=messages_len, unsent=0, summary="s", turn=turn
    )


def record(step: int, call_id: str = "c") -> ToolCallRecord:
    return ToolCallRecord(
        step=step, call_id=call_id, tool="t", key=f"w/{step}/{call_id}", arguments="{}", result=ToolResult(ok=True, output="")
    )


def turn(number: int, first_step: int) -> Turn:
    return Turn(number=number, question="q", started_at="t", first_message=0, first_step=first_step, status=TurnStatus.ANSWERED)


def test_the_version_is_always_in_the_json_and_the_parts_counters_never_are():
    state = new_state()
    state.calls.record(record(1))
    dumped = state.model_dump(mode="json", exclude_defaults=True)
    assert dumped["v"] == STATE_VERSION and "version" not in dumped["calls"]
    assert AgentState.model_validate(dumped).calls.tool_calls.items == [record(1)]


def test_the_conversation_counts_from_the_runs_first_message():
    conversation = new_state().conversation
    conversation.messages.reset([Message(role="user", content=str(i)) for i in range(5, 9)], base=5)
    conversation.unsent = 7
    assert conversation.count == 9 and [m.content for m in conversation.unsent_messages()] == ["7", "8"]
    conversation.seen("digest")
    assert (conversation.transcript, conversation.unsent, conversation.unsent_messages()) == ("digest", 9, [])
    page = conversation.page(0, 2)
    assert (page.total, page.offset, [m.content for m in page.messages]) == (9, 5, ["5", "6"])


def test_a_rollback_keeps_the_checkpoints_up_to_its_target():
    effects = new_state().effects
    cps = [checkpoint(f"cp-{i}") for i in range(3, 7)]
    effects.checkpoints.reset(cps, base=2)
    before = effects.version
    effects.keep_checkpoints_to(cps[1])
    assert [c.id for c in effects.checkpoints.items] == ["cp-3", "cp-4"] and effects.checkpoints.end == 4
    effects.keep_checkpoints_to(None)
    assert effects.checkpoints.items == [] and effects.checkpoints.base == 2, "the dropped ones stay counted"
    assert effects.version == before + 2, "the stream sees each change"


def test_archived_effects_come_back_in_front():
    effects = new_state().effects
    done = [Effect(tool="t", step=i, call_id="c", key=f"k{i}", arguments={}, effect=EffectClass.COMPENSABLE) for i in range(4)]
    effects.stack.reset(done[2:], base=2)
    effects.archive, effects.archived_left = "seg", 2
    assert effects.count == 4 and effects.stack.since(3) == done[3:]
    effects.unarchive(done[:2])
    assert (effects.stack.base, effects.stack.items, effects.archive, effects.archived_left) == (0, done, None, 0)


def test_a_replys_records_are_put_in_its_order_whatever_was_dropped_before():
    calls = new_state().calls
    calls.tool_calls.reset([record(1, "old")], base=40)
    first = calls.tool_calls.end
    for call_id in ("b", "c", "a"):  # as they finished
        calls.record(record(2, call_id))
    calls.in_order(first, ["a", "b", "c"])
    assert [r.call_id for r in calls.tool_calls.items] == ["old", "a", "b", "c"] and calls.tool_calls.end == 44


def test_asking_again_for_a_decision_forgets_the_last_one():
    calls = new_state().calls
    pending = PendingDecision(call_id="x", tool="t", step=1, key="k", arguments={}, error="e", requested_at="t")
    calls.decide_outcome("x", OutcomeDecision(choice=OutcomeChoice.RETRY))
    calls.ask_decision(pending)
    assert calls.outcome_decisions == {} and calls.pending_decisions == [pending]
    calls.stop_waiting({"x"})
    assert calls.pending_decisions == []


def test_a_sessions_handover_keeps_its_latest_turns_their_records_and_checkpoints():
    state = new_state()
    state.session.turns.reset([turn(n, first_step=10 * (n - 1)) for n in range(1, 13)])
    state.calls.tool_calls.reset([record(step) for step in range(1, 120, 5)])
    state.effects.checkpoints.reset([checkpoint(f"turn-{n}", turn=n) for n in range(1, 13)])
    sessions.trim(state)
    turns = state.session.turns
    assert (turns.base, [t.number for t in turns.items][:2], state.session.turn_number) == (2, [3, 4], 12)
    assert turns.at(2).number == 3, "turn n is item n - 1"
    records = state.calls.tool_calls
    assert all(r.step > 20 for r in records.items) and records.base + len(records.items) == 24
    assert records.items[0].step == 21 and records.base == 4
    checkpoints = state.effects.checkpoints
    assert [c.id for c in checkpoints.items][0] == "turn-3" and checkpoints.base == 2 and checkpoints.end == 12
    sessions.trim(state)
    assert state.session.turns.base == 2, "ten turns or fewer: nothing goes"
