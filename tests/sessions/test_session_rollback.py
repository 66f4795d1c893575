"""Rollback and fork across a session's turns (#24 item 4): a rollback to the checkpoint of an
earlier turn undoes the later turns' effects newest first and cuts the conversation back to that
turn (its plan names the turns it removes), also across continue-as-new and across a compaction;
a fork at a turn's checkpoint starts a new session with the conversation and the files up to there."""

from __future__ import annotations

from ratchet.contracts import Phase, TurnStatus
from tests.plugins.probe import PROBE_LOG
from tests.runs import call, start, wait_for
from tests.sessions.test_sessions import awaiting, session

SCRIPT = [
    {"content": "one"},
    {"tool_calls": [call("probe_append", label="t2")]},
    {"content": "two"},
    {"tool_calls": [call("probe_append", label="t3")]},
    {"content": "three"},
    {"tool_calls": [call("probe_append", label="t4")]},
    {"content": "four"},
]


def log(settings, workspace: str) -> list[str]:
    lines = (settings.workspace_root / workspace / PROBE_LOG).read_text().splitlines()
    return [f"{line.split()[0]} {line.split()[-1]}" for line in lines if not line.startswith("attempt")]


async def four_turns(client, settings, workspace: str, padding: str = "", **options):
    run = await start(client, settings, session(SCRIPT, workspace=workspace, **options))
    await wait_for(run, awaiting)
    for turn in (2, 3, 4):
        assert (await run.ask(f"question {turn}{padding}")).turn == turn
    return run


async def test_a_rollback_to_an_earlier_turn_undoes_the_later_turns_and_cuts_the_conversation(client, settings, worker):
    run = await four_turns(client, settings, "sess-rb", turns_per_run=2)  # continued as new in between
    dry = await run.rollback("turn-2", dry_run=True)
    assert [(item.turn, item.action) for item in dry.plan] == [(4, "undo"), (3, "undo")]
    assert dry.turns_removed == [3, 4] and "turns removed: 3, 4" in dry.summary()

    outcome = await run.rollback("turn-2")
    assert outcome.turns_removed == [3, 4] and len(outcome.report.undone) == 2
    assert log(settings, "sess-rb") == ["done t2", "done t3", "done t4", "undone t4", "undone t3"]
    state = await wait_for(run, awaiting)
    assert [t.number for t in state.session.turns.items] == [1, 2] and [c.id for c in state.effects.checkpoints.items][-1] == "turn-2"
    page = await run.transcript(0, 100)
    assert page.messages[-1].content == "two" and page.total == 7

    again = await run.ask("question 3, again")  # the conversation goes on from turn 2
    assert (again.turn, again.status, again.answer) == (3, TurnStatus.ANSWERED, "three")
    assert log(settings, "sess-rb")[-1] == "done t3"


async def test_a_rollback_to_a_compacted_turn_takes_the_summary_back_out(client, settings, worker):
    run = await four_turns(client, settings, "sess-rb-compact", padding=" in detail" * 30, compact_after_tokens=100)
    state = await run.state()
    assert state.session.compactions >= 1 and any(m.summary for m in (await run.transcript(0, 100)).messages)
    outcome = await run.rollback("turn-1")
    assert outcome.turns_removed == [2, 3, 4] and len(outcome.report.undone) == 3
    state = await wait_for(run, awaiting)
    assert not any(m.summary for m in state.conversation.messages.items) and (await run.transcript(0, 100)).total == 3
    assert (await run.ask("question 2, again")).answer == "two"


async def test_a_fork_at_a_turn_starts_a_session_with_its_conversation_and_files(client, settings, worker):
    run = await four_turns(client, settings, "sess-fork")
    fork = await run.fork("turn-2", objective="a different third question")
    state = await wait_for(fork, awaiting)
    assert [(t.number, t.question, t.answer) for t in state.session.turns.items] == [(3, "a different third question", "three")]
    messages = (await fork.transcript(0, 100)).messages
    assert [m.content for m in messages if m.role == "user"][-2:] == ["question 2", "a different third question"]
    assert log(settings, state.plan.workspace) == ["done t2", "done t3"]  # turn 2's files, then its own turn 3
    assert (await fork.ask("fourth")).turn == 4
    await fork.close()
    assert (await fork.result()).phase == Phase.DONE
    assert log(settings, "sess-fork")[-1] == "done t4"  # the source is untouched
