"""What a message sent while a session's turn runs does, by the session's message policy (#24 item 3):
queue (the next turn), join (the turn in flight, at its next step boundary), interrupt (the step in
flight cut short, the next turn answers it) and reject (refused with the reason). Dev server,
scripted model; the turn in flight is held in a `probe_wait` call."""

from __future__ import annotations

import pytest

from ratchet.client import Refused
from ratchet.contracts import ErrorType, Phase, TurnStatus
from tests.runs import call, start, until, wait_for, wait_for_running_activity
from tests.sessions.test_sessions import awaiting, session


def holding(seconds: float, then: str) -> list[dict]:
    """Turn 1 answers at once; turn 2 waits in a tool, then answers `then`; turn 3 answers "three"."""
    return [
        {"content": "one"},
        {"tool_calls": [call("probe_wait", seconds=seconds)]},
        {"content": then},
        {"content": "three"},
    ]


async def in_turn_two(client, settings, script: list[dict], **options):
    run = await start(client, settings, session(script, **options))
    await wait_for(run, awaiting)
    await until(lambda: _asked(run, "second"), "the second message taken")
    await wait_for_running_activity(run, "tool.probe_wait")
    return run


async def _asked(run, text: str) -> bool:
    """`ask` without waiting. Under the reject policy it was once refused with turn 1 still running
    although `state` had shown the session waiting (CI under load, cause not pinned down: see the
    stop's closing note); the setup asks again then, the refusals under test do not."""
    try:
        await run.ask(text, message_id=text, wait=False)
    except Refused as refused:
        if "turn 1 is running" not in str(refused):
            raise
        return False
    return True


async def test_queue_a_message_during_a_turn_is_the_next_turn(client, settings, worker):
    run = await in_turn_two(client, settings, holding(1, "two"))
    queued = await run.ask("later", message_id="later", wait=False)
    assert queued.turn is None and queued.status is None  # waiting behind turn 2
    assert (await run.answer("second")).answer == "two"
    later = await run.answer("later")
    assert (later.turn, later.answer) == (3, "three")
    assert [t.question for t in (await run.state()).session.turns.items] == ["first question", "second", "later"]


async def test_join_a_message_joins_the_turn_in_flight(client, settings, worker):
    run = await in_turn_two(client, settings, holding(1, "two, with the extra"), message_policy="join")
    joined = await run.ask("and one more thing", message_id="extra")
    assert (joined.turn, joined.answer) == (2, "two, with the extra")
    state = await wait_for(run, awaiting)
    assert len(state.session.turns.items) == 2 and set(state.session.turns.items[-1].message_ids) == {"second", "extra"}
    contents = [m.content for m in (await run.transcript(0, 100)).messages]
    tool_result = next(i for i, c in enumerate(contents) if c and c.startswith("waited"))
    assert contents[tool_result + 1] == "and one more thing"  # at the step boundary after the tool


async def test_interrupt_cuts_the_turn_short_and_answers_the_new_message(client, settings, worker):
    run = await in_turn_two(client, settings, holding(60, "answer to the interruption"), message_policy="interrupt")
    now = await run.ask("stop, do this instead", message_id="now")
    assert (now.turn, now.status, now.answer) == (3, TurnStatus.ANSWERED, "answer to the interruption")
    cut = await run.answer("second")
    assert cut.turn == 2 and cut.status == TurnStatus.INTERRUPTED
    state = await run.state()
    [record] = [r for r in state.calls.tool_calls.items if r.tool == "probe_wait"]
    assert record.result.error_type == ErrorType.INTERRUPTED  # the model is told the call did not finish
    messages = (await run.transcript(0, 100)).messages
    told = [i for i, m in enumerate(messages) if m.role == "tool" and m.is_error]
    assert told and messages[told[-1] + 1].content == "stop, do this instead"


async def test_reject_refuses_a_message_during_a_turn(client, settings, worker):
    run = await in_turn_two(client, settings, holding(2, "two"), message_policy="reject")
    with pytest.raises(Refused, match="turn 2 is running and this session's message policy is reject"):
        await run.ask("not now")
    await run.send("not now either")  # fire and forget: dropped and counted
    assert (await run.answer("second")).answer == "two"
    state = await wait_for(run, awaiting)
    assert state.session.messages_rejected == 1 and len(state.session.turns.items) == 2
    assert (await run.ask("now?")).turn == 3  # between turns a message is taken
    assert state.phase == Phase.AWAITING_MESSAGE
