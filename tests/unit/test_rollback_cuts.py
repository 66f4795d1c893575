"""Rollback cuts across a session's turns and across a continue-as-new (pure: no server): where a
rollback can go (ratchet/contracts/rollback_plan.py), what it would undo, what a handover keeps
(workflows/handover.py `trimmed`, workflows/sessions.py `trim`) and what going back leaves of the
turns (`sessions.cut_to`, and `rollback.rewind` to a checkpoint whose messages are held)."""

import pytest

from ratchet.contracts import (
    STATE_VERSION,
    AgentRun,
    AgentState,
    Budget,
    Checkpoint,
    Effect,
    EffectClass,
    EffectStatus,
    Message,
    ModelSettings,
    Phase,
    RunPlan,
    SessionPolicy,
    ToolCallRecord,
    ToolResult,
    ToolSpec,
    Turn,
    TurnStatus,
)
from ratchet.contracts.rollback_plan import START, plan_of, resolve, undoable
from ratchet.workflows import handover, rollback, sessions
from ratchet.workflows.handover import KEEP_TOOL_CALLS
from ratchet.workflows.sessions import KEEP_TURNS

TOOLS = [
    ToolSpec(name="write", effect=EffectClass.COMPENSABLE, has_undo=True),
    ToolSpec(name="charge", effect=EffectClass.COMPENSABLE),  # compensable, but no undo registered
    ToolSpec(name="send", effect=EffectClass.IRREVERSIBLE),
    ToolSpec(name="delegate", kind="child", effect=EffectClass.IRREVERSIBLE),
]


def plan(session: SessionPolicy | None = None) -> RunPlan:
    return RunPlan(
        agent="a",
        system_prompt="sys",
        model=ModelSettings(provider="p", model="m"),
        tools=TOOLS,
        budget=Budget(),
        workspace="w",
        call_ref="ref",
        session=session,
    )


def effect(step: int, tool: str = "write", turn: int = 0, **fields) -> Effect:
    spec = next(t for t in TOOLS if t.name == tool)
    fields.setdefault("status", EffectStatus.DONE)
    call, key = f"c{step}", f"s/{step}/c{step}"
    return Effect(tool=tool, step=step, call_id=call, key=key, arguments={}, effect=spec.effect, turn=turn, **fields)


def record(step: int) -> ToolCallRecord:
    result, call = ToolResult(ok=True, output="written"), f"c{step}"
    return ToolCallRecord(step=step, call_id=call, tool="write", key=f"s/{step}/{call}", arguments="{}", result=result)


def take(state: AgentState, checkpoint_id: str, turn: int) -> None:
    conversation = state.conversation
    state.effects.add_checkpoint(
        Checkpoint(
            id=checkpoint_id,
            step=state.step,
            created_at="t",
            turn=turn,
            effects_len=state.effects.count,
            messages_len=conversation.count,
            transcript=conversation.transcript,
            unsent=conversation.unsent,
            summary=checkpoint_id,
        )
    )


def add_turns(state: AgentState, count: int) -> AgentState:
    """`count` more answered turns. Turn k: its question (message id `m{k}`), a step that writes
    (its effect and record, then checkpoint `cp-N` with the tool's result not yet seen by the
    model), a step that answers (checkpoint `turn-k`). Four messages and two steps a turn."""
    conversation = state.conversation
    for _ in range(count):
        k = state.session.turn_number + 1
        conversation.messages.append(Message(role="user", content=f"q{k}", turn=k))
        ids = {f"m{k}": f"digest of q{k}"} if k > 1 else {}  # the first turn answers the objective
        first, step = conversation.count - 1, state.step
        state.session.turns.append(
            Turn(number=k, question=f"q{k}", message_ids=ids, started_at="t", first_message=first, first_step=step)
        )
        state.step += 1
        conversation.messages.append(Message(role="assistant", content=f"writing {k}"))
        conversation.seen(f"transcript-{state.step}")
        conversation.messages.append(Message(role="tool", content="written", tool_call_id=f"c{state.step}"))
        state.effects.stack.append(effect(state.step, turn=k))
        state.calls.record(record(state.step))
        take(state, f"cp-{state.effects.checkpoints.end + 1}", k)
        state.step += 1
        conversation.messages.append(Message(role="assistant", content=f"a{k}"))
        conversation.seen(f"transcript-{state.step}")
        turn = state.session.turns.items[-1]
        turn.status, turn.answer, turn.ended_at = TurnStatus.ANSWERED, f"a{k}", "t"
        take(state, f"turn-{k}", k)
    return state


def session(turns: int) -> AgentState:
    state = AgentState(
        v=STATE_VERSION,
        workflow_id="s",
        run=AgentRun(agent="a", objective="q1"),
        plan=plan(SessionPolicy()),
        phase=Phase.AWAITING_MESSAGE,
    )
    state.conversation.messages.append(Message(role="system", content="sys"))
    return add_turns(state, turns)


def archive_below_last_checkpoint(state: AgentState) -> None:
    """What workflows/effects_archive.py `archive` leaves in the state (the segment's store aside)."""
    state.effects.stack.drop_before(state.effects.checkpoints.items[-1].effects_len)
    state.effects.archive = "segment-1"


def compacted(state: AgentState) -> AgentState:
    """What workflows/compaction.py `compact` leaves at the end of the last turn: the summary in the
    conversation and in the turn's checkpoint."""
    conversation, last = state.conversation, state.session.turn_number
    conversation.messages.append(Message(role="user", content=f"[Summary of turns {last}]", summary=True))
    conversation.seen(f"transcript-compacted-{last}")
    state.session.summarised(last)
    update = {"messages_len": conversation.count, "unsent": conversation.unsent, "transcript": conversation.transcript}
    state.effects.replace_last_checkpoint(state.effects.checkpoints.items[-1].model_copy(update=update))
    return state


def numbers(state: AgentState) -> list[int]:
    return [t.number for t in state.session.turns.items]


def ids(state: AgentState) -> list[str]:
    return [c.id for c in state.effects.checkpoints.items]


# --- where a rollback goes -----------------------------------------------------------------------


def test_the_built_session_is_laid_out_as_its_turns_say():
    state = session(3)
    assert ids(state) == ["cp-1", "turn-1", "cp-3", "turn-2", "cp-5", "turn-3"]
    assert state.conversation.count == 13 and state.effects.count == 3 and state.step == 6
    assert state.session.turns.at(1).first_message == 5 and state.conversation.messages.at(5).content == "q2"


def test_a_checkpoint_resolves_to_the_effects_the_run_had_there_and_start_to_none():
    state = session(3)
    target = resolve(state, "turn-2")
    assert (target.id, target.since, target.name) == ("turn-2", 2, "turn-2")
    assert resolve(state, "start") is START and (START.since, START.id, START.name) == (0, None, "the start")


def test_an_unknown_checkpoint_is_refused_naming_the_ones_there_are():
    with pytest.raises(ValueError, match=r"unknown checkpoint 'cp-9'; this run has: cp-1, turn-1 \(or 'start'"):
        resolve(session(1), "cp-9")
    fresh = AgentState(v=STATE_VERSION, workflow_id="w", run=AgentRun(agent="a", objective="o"))
    with pytest.raises(ValueError, match="this run has: none yet"):
        resolve(fresh, "turn-1")


def test_a_checkpoint_a_handover_dropped_is_refused_and_the_refusal_says_it_is_no_longer_held():
    state = handover.trimmed(session(KEEP_TURNS + 2))
    assert state.effects.checkpoints.base == 4 and ids(state)[0] == "cp-5"
    with pytest.raises(ValueError, match="unknown checkpoint 'turn-2'") as refused:
        resolve(state, "turn-2")
    message = str(refused.value)
    assert "this run has: cp-5, turn-3," in message and "no longer held" in message
    assert resolve(state, "turn-3").since == 3, "the oldest turn kept can still be gone back to"


def test_the_refusal_of_a_dropped_checkpoint_says_what_was_dropped():
    state = handover.trimmed(session(KEEP_TURNS + 2))
    with pytest.raises(ValueError) as refused:
        resolve(state, "turn-2")
    dropped = str(refused.value).rsplit(";", 1)[1]  # what is said of the ones no longer held
    assert "no longer held" in dropped and "checkpoints" in dropped


# --- what it would undo --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "tool,expected",
    [
        ("write", True),
        ("charge", False),  # compensable, but the tool has no undo
        ("send", False),
        ("delegate", True),  # a sub-agent: its parent undoes what it left, whatever its class
    ],
)
def test_an_effect_is_undoable_when_its_tool_can_undo_it_or_it_is_a_sub_agent(tool, expected):
    assert undoable(plan(), effect(1, tool)) is expected


def test_an_effect_of_a_tool_the_plan_no_longer_has_is_not_undoable():
    gone = Effect(tool="gone", step=1, call_id="c", key="k", arguments={}, effect=EffectClass.COMPENSABLE)
    assert not undoable(plan(), gone)


def test_the_dry_run_lists_the_effects_above_the_target_newest_first_with_what_happens_to_each():
    state = AgentState(v=STATE_VERSION, workflow_id="w", run=AgentRun(agent="a", objective="o"), plan=plan())
    state.effects.stack.extend([effect(1), effect(2, "send")])
    take(state, "cp-1", 0)
    state.effects.stack.extend(
        [
            effect(3, undo={"description": "restore a.txt"}),
            effect(4, "send"),
            effect(5, status=EffectStatus.UNDONE),
            effect(6, "delegate", undo={"child_id": "w/6", "effects": [{}, {}]}),
        ]
    )
    items = plan_of(state, "cp-1")
    assert [(i.step, i.action) for i in items] == [(6, "undo"), (5, "already_undone"), (4, "irreversible"), (3, "undo")]
    assert items[0].description == "undo the 2 effects sub-agent w/6 left in place"
    assert items[3].description == "restore a.txt"
    assert [i.step for i in plan_of(state, "start")] == [6, 5, 4, 3, 2, 1]


def test_the_dry_run_of_a_run_that_archived_its_effects_at_a_handover_counts_them_in_one_item():
    state = session(4)
    archive_below_last_checkpoint(state)
    state = handover.trimmed(state)
    assert state.effects.stack.base == 4 and state.effects.stack.items == []
    add_turns(state, 2)  # turns 5 and 6, after the handover
    assert [(i.step, i.turn) for i in plan_of(state, "turn-4")] == [(11, 6), (9, 5)], "nothing archived above it"
    items = plan_of(state, "turn-2")
    assert [(i.step, i.action) for i in items] == [(11, "undo"), (9, "undo"), (0, "archived")]
    assert items[-1].key == "segment-1" and items[-1].description.startswith("2 earlier effects")
    assert items[-1].tool == "(archived)"
    assert plan_of(state, "start")[-1].description.startswith("4 earlier effects")


# --- what a handover keeps -----------------------------------------------------------------------


def test_a_session_of_keep_turns_turns_hands_over_all_of_them():
    state = session(KEEP_TURNS)
    sessions.trim(state)
    assert numbers(state) == list(range(1, KEEP_TURNS + 1)) and state.session.turns.base == 0
    assert state.effects.checkpoints.base == 0 and state.calls.tool_calls.base == 0


def test_a_handover_keeps_the_latest_turns_with_their_checkpoints_from_the_middle_of_a_turn_too():
    state = session(KEEP_TURNS + 2)
    sessions.trim(state)
    assert numbers(state) == list(range(3, KEEP_TURNS + 3)) and state.session.turn_number == KEEP_TURNS + 2
    assert ids(state)[:2] == ["cp-5", "turn-3"] and state.effects.checkpoints.base == 4
    records = state.calls.tool_calls
    assert records.items[0].step == 5 and records.base == 2, "turn 3 began after step 4: its records stay"


def test_each_handover_drops_from_where_the_last_one_left_off():
    state = session(KEEP_TURNS + 2)
    sessions.trim(state)
    add_turns(state, 3)
    sessions.trim(state)
    assert numbers(state)[0] == 6 and state.session.turns.base == 5
    assert ids(state)[0] == "cp-11" and state.effects.checkpoints.base == 10
    assert state.calls.tool_calls.base == 5 and state.calls.tool_calls.items[0].step == 11
    assert state.session.turns.at(5).number == 6, "turn n is still item n - 1"


def test_a_handover_keeps_the_messages_from_the_last_checkpoints_unsent_on():
    state = session(2)
    take(state, "cp-5", 2)  # a step that took a checkpoint, then more the model has not seen
    state.conversation.messages.extend([Message(role="user", content="late"), Message(role="user", content="later")])
    handed = handover.trimmed(state)
    assert handed is state
    messages = state.conversation.messages
    assert messages.base == 9 and [m.content for m in messages.items] == ["late", "later"]
    assert state.conversation.count == 11 and state.conversation.unsent_messages() == messages.items


def test_a_handover_in_the_middle_of_a_step_keeps_what_the_last_checkpoint_had_not_sent():
    state = session(2)
    state.effects.checkpoints.items.pop()  # handed over at a step boundary before turn 2's end: cp-3 is the last
    assert state.effects.last_checkpoint.id == "cp-3" and state.effects.last_checkpoint.unsent == 7
    handover.trimmed(state)
    assert state.conversation.messages.base == 7, "the tool's result the model had not seen when cp-3 was taken"
    assert [m.content for m in state.conversation.messages.items] == ["written", "a2"]


def test_a_handover_keeps_the_last_keep_tool_calls_records():
    state = AgentState(v=STATE_VERSION, workflow_id="w", run=AgentRun(agent="a", objective="o"), plan=plan())
    for step in range(1, KEEP_TOOL_CALLS + 11):
        state.calls.record(record(step))
    handover.trimmed(state)
    records = state.calls.tool_calls
    assert (records.base, len(records.items), records.items[0].step) == (10, KEEP_TOOL_CALLS, 11)
    handover.trimmed(state)
    assert records.base == 10, "no more than that: nothing goes"


# --- going back ----------------------------------------------------------------------------------


def test_back_to_a_turns_end_removes_the_turns_after_it_and_that_turn_stays_answered():
    state = session(4)
    assert sessions.cut_to(state, resolve(state, "turn-2").checkpoint) == [3, 4]
    assert numbers(state) == [1, 2] and state.session.turn_number == 2
    turn = state.session.turns.last
    assert (turn.status, turn.answer) == (TurnStatus.ANSWERED, "a2") and not sessions.turn_running(state)


def test_back_to_the_middle_of_a_turn_runs_that_turn_on_from_there():
    state = session(4)
    assert sessions.cut_to(state, resolve(state, "cp-3").checkpoint) == [3, 4]
    turn = state.session.turns.last
    assert (turn.number, turn.status, turn.answer, turn.ended_at) == (2, TurnStatus.RUNNING, None, None)
    assert sessions.turn_running(state)
    answer = sessions.answer_of(state, "m2")
    assert (answer.turn, answer.status, answer.used) == (2, TurnStatus.RUNNING, None), "its ask waits for it again"


def test_an_ask_whose_turn_a_rollback_removed_is_answered_with_why():
    state = session(4)
    sessions.cut_to(state, resolve(state, "turn-1").checkpoint)
    answer = sessions.answer_of(state, "m3")
    assert (answer.turn, answer.status, answer.error) == (None, None, "a rollback removed its turn")


async def test_a_rollback_to_after_a_compaction_keeps_its_summary_and_its_mark():
    state = compacted(session(1))
    add_turns(state, 2)
    await rollback.rewind(state, state.plan, resolve(state, "turn-2"))
    assert [m.content for m in state.conversation.messages.items if m.summary] == ["[Summary of turns 1]"]
    assert state.session.compacted_to == 1 and numbers(state) == [1, 2]


async def test_a_rollback_to_before_the_only_compaction_leaves_no_turn_summarised():
    state = compacted(session(2))
    await rollback.rewind(state, state.plan, resolve(state, "turn-1"))
    assert not any(m.summary for m in state.conversation.messages.items)
    assert state.session.compacted_to == 0


def test_a_run_that_is_not_a_session_has_no_turns_to_cut():
    state = AgentState(v=STATE_VERSION, workflow_id="w", run=AgentRun(agent="a", objective="o"), plan=plan())
    take(state, "cp-1", 0)
    assert sessions.cut_to(state, state.effects.checkpoints.items[0]) == []
    assert sessions.cut_to(state, None) == [] and state.session.turns.items == []


def test_after_a_handover_a_rollback_cuts_the_turns_it_holds_by_their_numbers():
    state = handover.trimmed(session(KEEP_TURNS + 3))  # turns 4 to 13 held
    assert sessions.cut_to(state, resolve(state, "turn-5").checkpoint) == list(range(6, KEEP_TURNS + 4))
    assert numbers(state) == [4, 5] and state.session.turns.base == 3 and state.session.turn_number == 5


def test_after_a_handover_back_to_the_middle_of_the_oldest_turn_held():
    state = handover.trimmed(session(KEEP_TURNS + 3))
    assert ids(state)[0] == "cp-7"
    removed = sessions.cut_to(state, resolve(state, "cp-7").checkpoint)
    assert removed == list(range(5, KEEP_TURNS + 4))
    assert numbers(state) == [4] and state.session.turns.last.status == TurnStatus.RUNNING


async def test_a_rollback_across_a_handover_rewinds_the_conversation_checkpoints_and_turns_together():
    state = session(KEEP_TURNS + 2)
    archive_below_last_checkpoint(state)
    handover.trimmed(state)
    add_turns(state, 2)  # turns 13 and 14 on the continuation
    target = resolve(state, "turn-13")
    state.effects.stack.last.status = EffectStatus.UNDONE  # as rollback.undo_above left it
    removed = await rollback.rewind(state, state.plan, target)
    assert removed == [14] and numbers(state)[-1] == 13 and state.session.turns.base == 2
    conversation = state.conversation
    assert (conversation.count, conversation.unsent, conversation.transcript) == (53, 53, "transcript-26")
    assert conversation.messages.base == 49 and conversation.messages.last.content == "a13"
    assert ids(state)[-1] == "turn-13" and state.effects.checkpoints.end == 26
    assert state.effects.stack.base == 12 and [e.turn for e in state.effects.stack.items] == [13, 14]
    assert [(i.step, i.action) for i in plan_of(state, "turn-12")] == [(27, "already_undone"), (25, "undo")]
