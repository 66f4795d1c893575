"""A session's messages (workflows/sessions.py): where each is placed under its `MessagePolicy`,
which `ask`s are refused and why, and what an `ask` is answered. Pure: no server (the turns are
built as `open_next` and `close_turn` leave them: both read the workflow's clock)."""

import pytest

from ratchet.contracts import (
    STATE_VERSION,
    AgentRun,
    AgentState,
    AskRequest,
    Budget,
    MessagePolicy,
    ModelSettings,
    PendingMessage,
    Phase,
    RunPlan,
    SessionPolicy,
    Turn,
    TurnStatus,
    TurnUsed,
)
from ratchet.workflows import sessions
from ratchet.workflows.sessions import KEEP_TURNS

Policy = MessagePolicy


def plan(session: SessionPolicy | None) -> RunPlan:
    model = ModelSettings(provider="p", model="m")
    return RunPlan(
        agent="a",
        system_prompt="s",
        model=model,
        tools=[],
        budget=Budget(),
        workspace="w",
        call_ref="r",
        session=session,
    )


def session(policy: MessagePolicy = Policy.QUEUE, running: bool = True) -> AgentState:
    """A session at its first turn: running (phase THINKING), or answered (waiting for a message)."""
    state = AgentState(
        v=STATE_VERSION,
        workflow_id="s",
        run=AgentRun(agent="a", objective="o"),
        plan=plan(SessionPolicy(message_policy=policy)),
        phase=Phase.THINKING if running else Phase.AWAITING_MESSAGE,
    )
    first = Turn(number=1, question="o", started_at="t", first_message=1, first_step=0)
    if not running:
        first.status, first.answer, first.ended_at = TurnStatus.ANSWERED, "a1", "t"
        first.used = TurnUsed(steps=2, tokens=300, cost_usd=0.01)
    state.session.turns.append(first)
    return state


def message(text: str, message_id: str | None = None) -> PendingMessage:
    return PendingMessage(text=text, id=message_id)


def ask(text: str, message_id: str) -> AskRequest:
    return AskRequest(message_id=message_id, text=text)


def join_turn(state: AgentState, text: str, message_id: str) -> None:
    """A message that joined the turn in flight (the join policy) and reached it at a step boundary."""
    sessions.accept(state, message(text, message_id))
    sessions.joined(state)
    state.session.inbox.clear()  # inbox.deliver took it into the conversation


# --- where a message goes ------------------------------------------------------------------------


@pytest.mark.parametrize("policy", list(Policy))
def test_between_turns_a_message_waits_for_a_turn_of_its_own_whatever_the_policy(policy):
    state = session(policy, running=False)
    sessions.accept(state, message("next", "m2"))
    assert state.session.queued == [message("next", "m2")] and state.session.inbox == []
    assert state.session.messages_rejected == 0 and sessions.waiting(state)


def test_under_queue_a_message_during_a_turn_is_the_next_turn():
    state = session(Policy.QUEUE)
    sessions.accept(state, message("next", "m2"))
    assert state.session.queued == [message("next", "m2")] and not sessions.interrupting(state)


def test_under_join_a_message_during_a_turn_joins_it_and_that_turn_answers_it():
    state = session(Policy.JOIN)
    sessions.accept(state, message("also this", "m2"))
    assert state.session.inbox == [message("also this", "m2")] and state.session.queued == []
    assert sessions.answer_of(state, "m2").turn is None, "not yet seen by the turn"
    sessions.joined(state)
    assert sessions.answer_of(state, "m2").turn == 1


def test_under_interrupt_a_message_during_a_turn_waits_marked_to_cut_the_turn_short():
    state, sent = session(Policy.INTERRUPT), message("stop, do this", "m2")
    sessions.accept(state, sent)
    assert state.session.queued == [sent.model_copy(update={"interrupt": True})] and not sent.interrupt
    assert sessions.interrupting(state)


def test_a_second_interrupting_message_does_not_cut_short_the_turn_that_answers_the_first():
    state = session(Policy.INTERRUPT)
    sessions.accept(state, message("first", "m2"))
    sessions.accept(state, message("second", "m3"))
    # what turns.next_turn does next: turn 1 ends interrupted (close_turn), turn 2 opens for "first" (open_next)
    state.session.turns.last.status = TurnStatus.INTERRUPTED
    sessions.release_waiting(state)  # close_turn's part that needs no clock
    opened = state.session.queued.pop(0)
    state.session.turns.append(
        Turn(number=2, question=opened.text, message_ids={"m2": "d"}, started_at="t", first_message=3, first_step=1)
    )
    assert not sessions.interrupting(state), "turn 2 answers 'first'; 'second' is turn 3's"


def test_under_reject_a_send_during_a_turn_is_dropped_and_counted():
    state = session(Policy.REJECT)
    sessions.accept(state, message("ignored"))
    sessions.accept(state, message("ignored"))
    assert state.session.messages_rejected == 2 and state.session.queued == state.session.inbox == []


@pytest.mark.parametrize("policy", [Policy.QUEUE, Policy.JOIN, Policy.INTERRUPT])
def test_an_ask_sent_again_is_placed_once(policy):
    state = session(policy)
    sessions.accept(state, message("q", "m2"))
    sessions.accept(state, message("q", "m2"))
    assert len(state.session.queued + state.session.inbox) == 1


def test_an_ask_its_turn_already_took_is_not_placed_again_but_sends_always_are():
    state = session(Policy.JOIN)
    join_turn(state, "q", "m2")
    sessions.accept(state, message("q", "m2"))
    assert state.session.inbox == []
    sessions.accept(state, message("note"))
    sessions.accept(state, message("note"))
    assert state.session.inbox == [message("note"), message("note")], "a send has no id to know it by"


# --- asks refused --------------------------------------------------------------------------------


def test_an_ask_to_a_run_that_is_not_a_session_is_refused():
    state = session()
    state.plan = plan(None)
    with pytest.raises(ValueError, match="run s is not a session; `send` a message instead"):
        sessions.validate_ask(state, ask("q", "m2"))


@pytest.mark.parametrize("phase", [Phase.DONE, Phase.FAILED, Phase.CANCELLED])
def test_an_ask_to_a_session_that_ended_is_refused_naming_how(phase):
    state = session(running=False)
    state.phase = phase
    with pytest.raises(ValueError, match=f"session s ended {phase}; it takes no more messages"):
        sessions.validate_ask(state, ask("q", "m2"))


def test_an_ask_to_a_closing_session_is_refused():
    state = session(running=False)
    sessions.close(state)
    with pytest.raises(ValueError, match="session s is closing"):
        sessions.validate_ask(state, ask("q", "m2"))


def test_a_message_id_reused_for_another_text_is_refused_queued_or_answered():
    state = session(Policy.JOIN)
    join_turn(state, "in the turn", "m2")
    state.session.turns.last.status = TurnStatus.ANSWERED
    sessions.accept(state, message("queued", "m3"))
    assert state.session.queued == [message("queued", "m3")]
    for message_id, other in (("m2", "queued"), ("m3", "in the turn")):
        with pytest.raises(ValueError, match=f"message id '{message_id}' was used for a different message"):
            sessions.validate_ask(state, ask(other, message_id))


def test_the_same_ask_again_is_taken_even_where_a_new_one_is_refused():
    state = session(Policy.REJECT, running=False)
    sessions.accept(state, message("q", "m2"))
    state.session.turns.last.status = TurnStatus.RUNNING  # a turn runs now, under reject
    sessions.validate_ask(state, ask("q", "m2"))
    state.session.closing = True
    sessions.validate_ask(state, ask("q", "m2"))  # a retry after a lost reply: answered once


def test_under_reject_an_ask_during_a_turn_is_refused_and_between_turns_taken():
    with pytest.raises(ValueError, match="turn 1 is running and this session's message policy is reject"):
        sessions.validate_ask(session(Policy.REJECT), ask("q", "m2"))
    sessions.validate_ask(session(Policy.REJECT, running=False), ask("q", "m2"))
    for policy in (Policy.QUEUE, Policy.JOIN, Policy.INTERRUPT):
        sessions.validate_ask(session(policy), ask("q", "m2"))


def test_an_answer_is_asked_only_for_a_message_the_session_holds():
    state = session()
    sessions.accept(state, message("q", "m2"))
    sessions.validate_answer(state, "m2")
    with pytest.raises(ValueError, match=f"no message 'm9' in this session .* last {KEEP_TURNS} turns"):
        sessions.validate_answer(state, "m9")


def test_close_is_for_an_open_session_and_ends_it_after_what_is_queued():
    state = session()
    sessions.accept(state, message("q", "m2"))
    assert sessions.close(state) == "closing after turn 2" and state.session.closing and sessions.waiting(state)
    state.phase = Phase.DONE
    with pytest.raises(ValueError, match="run s is DONE, not an open session"):
        sessions.close(state)


# --- what an ask is answered ---------------------------------------------------------------------


def test_an_ask_whose_turn_ended_is_answered_with_the_turn_and_what_it_spent():
    state = session(Policy.JOIN)
    join_turn(state, "q", "m2")
    running = sessions.answer_of(state, "m2")
    assert (running.turn, running.status, running.answer, running.used) == (1, TurnStatus.RUNNING, None, None)
    turn = state.session.turns.last
    turn.status, turn.answer, turn.used = TurnStatus.ANSWERED, "a1", TurnUsed(steps=1, tokens=10)
    ended = sessions.answer_of(state, "m2")
    assert (ended.turn, ended.status, ended.answer, ended.used) == (1, TurnStatus.ANSWERED, "a1", turn.used)
    assert not ended.moved


def test_a_queued_ask_is_answered_with_no_turn_yet():
    state = session()
    sessions.accept(state, message("q", "m2"))
    answer = sessions.answer_of(state, "m2")
    assert (answer.turn, answer.status, answer.error, answer.moved) == (None, None, None, False)


def test_a_queued_ask_of_a_session_that_moved_is_answered_moved_and_an_answered_one_is_not():
    state = session(Policy.JOIN)
    join_turn(state, "q", "m2")
    state.session.turns.last.status = TurnStatus.ANSWERED
    sessions.accept(state, message("next", "m3"))
    state.release.move()
    assert sessions.answer_of(state, "m3").moved, "its turn runs on the new build: ask that run"
    assert not sessions.answer_of(state, "m2").moved and sessions.answer_of(state, "m2").turn == 1


def test_an_ask_the_session_no_longer_holds_is_answered_with_why():
    state = session()
    assert sessions.answer_of(state, "m2").error == "a rollback removed its turn"
    state.phase = Phase.DONE
    assert sessions.answer_of(state, "m2").error == "the session ended DONE"
    state.last_error = "budget exhausted"
    assert sessions.answer_of(state, "m2").error == "budget exhausted"


def test_an_ask_still_queued_when_the_session_ended_is_answered_with_how_it_ended():
    state = session()
    sessions.accept(state, message("q", "m2"))
    state.phase = Phase.CANCELLED  # the `ask` waiting for it is released (sessions._settled)
    answer = sessions.answer_of(state, "m2")
    assert answer.error is not None and "CANCELLED" in answer.error
