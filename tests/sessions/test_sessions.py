"""Session runs (issue #24): a run that answers turn after turn, waits in AWAITING_MESSAGE between
turns (findable by search attribute), and ends DONE on `close` or its idle timeout; each turn has
its number, its answer, what it spent and its checkpoint (dev server, scripted model)."""

from __future__ import annotations

import json
import uuid

import pytest

from ratchet.client import InvalidInput, Refused, RunCancelled
from ratchet.contracts import Phase, TurnStatus
from tests.plugins.probe import PROBE_LOG
from tests.runs import call, runs, scripted, start, until, wait_for


def session(script: list[dict], objective: str = "first question", workspace: str | None = None, **options) -> dict:
    """A run of the `chatter` profile (a session profile); `options` override its session settings."""
    extra = {"workspace": workspace} if workspace else {}
    if options:
        extra["session"] = options
    return scripted("chatter", script, objective=objective, **extra)


def awaiting(state) -> bool:
    return state.phase == Phase.AWAITING_MESSAGE


async def test_a_session_answers_turn_after_turn_and_closes_done(client, settings, worker):
    script = [
        {"content": "answer one"},
        {"tool_calls": [call("probe_append", label="two")]},
        {"content": "answer two"},
        {"content": "answer three"},
    ]
    run = await start(client, settings, session(script, workspace="sess-turns"))
    state = await wait_for(run, awaiting)
    assert [(t.number, t.status, t.answer) for t in state.session.turns.items] == [(1, TurnStatus.ANSWERED, "answer one")]
    listed = await until(  # visibility follows the search attributes a moment after the state
        lambda: runs(client, settings).list(phase="AWAITING_MESSAGE", query=f'WorkflowId="{run.workflow_id}"'),
        "the session listed as AWAITING_MESSAGE",
    )
    assert [r.workflow_id for r in listed] == [run.workflow_id]

    second = await run.ask("second question")
    assert (second.turn, second.status, second.answer) == (2, TurnStatus.ANSWERED, "answer two")
    assert second.used is not None and second.used.steps == 2
    third = await run.ask("third question")
    assert (third.turn, third.answer) == (3, "answer three")

    state = await run.state()
    assert [t.question for t in state.session.turns.items] == ["first question", "second question", "third question"]
    assert [t.used.steps for t in state.session.turns.items] == [1, 2, 1] and state.used.steps == 4
    assert [c.id for c in state.effects.checkpoints.items] == ["turn-1", "turn-2", "turn-3"]
    assert [e.turn for e in state.effects.stack.items] == [2]
    page = await run.transcript(0, 100)
    assert [m.content for m in page.messages if m.role == "user"] == [
        "first question",
        "second question",
        "third question",
    ]

    assert "closing" in await run.close()
    result = await run.result()
    assert result.phase == Phase.DONE and result.answer == "answer three"
    with pytest.raises(Refused, match="has ended DONE"):
        await run.ask("fourth question")
    # a close sent again (its first answer lost on the way) is answered, not refused
    assert await run.close() == f"session {run.workflow_id} has ended DONE (COMPLETED)"


async def test_an_idle_session_closes_done_after_its_timeout(client, settings, worker):
    run = await start(client, settings, session([{"content": "only answer"}], idle_timeout_s=1))
    result = await run.result()
    assert result.phase == Phase.DONE and result.answer == "only answer"
    state = await run.state()
    assert [t.status for t in state.session.turns.items] == [TurnStatus.ANSWERED]


async def test_a_turn_has_its_own_budget_beside_the_sessions(client, settings, worker):
    loop = [{"tool_calls": [call("probe_echo", text=str(i))]} for i in range(5)]
    script = [{"content": "one"}, *loop, {"content": "never reached"}]
    run = await start(client, settings, session(script, turn_max_steps=3))
    await wait_for(run, awaiting)
    over = await run.ask("loop for a while")
    assert over.status == TurnStatus.BUDGET_EXHAUSTED and "3 of 3 steps" in (over.error or "")
    state = await wait_for(run, awaiting)
    assert state.session.turns.items[-1].used.steps == 3 and state.used.steps == 4
    assert (await run.ask("and now?")).status == TurnStatus.ANSWERED  # the session goes on


@pytest.mark.e2e  # the `ratchet` CLI as processes
async def test_ratchet_ask_prints_the_answer_and_the_same_message_id_is_answered_once(
    client, settings, worker, tmp_path
):
    from tests.runs import ratchet

    script = [{"content": "one"}, {"tool_calls": [call("probe_append", label="once")]}, {"content": "two"}]
    path = tmp_path / "run.json"
    path.write_text(json.dumps(scripted("probe", script, workspace="sess-ask")))  # probe is no session profile
    workflow_id = f"sess-ask-{uuid.uuid4().hex[:8]}"
    code, out = await ratchet(settings, "start", "--file", str(path), "--session", "--id", workflow_id)
    assert code == 0, out
    run = runs(client, settings).get(workflow_id)
    await wait_for(run, awaiting)
    code, out = await ratchet(settings, "ask", run.workflow_id, "append once", "--message-id", "m-2")
    assert code == 0 and out.splitlines()[0] == "two" and "turn 2: answered" in out
    again = await run.ask("append once", message_id="m-2")  # a retry after a lost reply
    assert (again.turn, again.answer) == (2, "two")
    log = (settings.workspace_root / "sess-ask" / PROBE_LOG).read_text()
    assert log.count("done ") == 1  # the tool ran once
    assert len((await run.state()).session.turns.items) == 2
    with pytest.raises(Refused, match="used for a different message"):
        await run.ask("something else", message_id="m-2")
    code, out = await ratchet(settings, "close", run.workflow_id)
    assert code == 0 and (await run.result()).phase == Phase.DONE


async def test_ask_with_no_wait_returns_the_turn_to_follow(client, settings, worker):
    script = [{"content": "one"}, {"tool_calls": [call("probe_wait", seconds=1)]}, {"content": "two"}]
    run = await start(client, settings, session(script))
    await wait_for(run, awaiting)
    started = await run.ask("take your time", message_id="slow", wait=False)
    assert started.message_id == "slow" and started.answer is None
    answered = await run.answer("slow")
    assert (answered.turn, answered.status, answered.answer) == (2, TurnStatus.ANSWERED, "two")


async def test_bad_input_gets_a_clear_error(client, settings, worker):
    with pytest.raises(InvalidInput, match="session.message_policy"):
        await start(client, settings, session([{"content": "one"}], message_policy="shout"))
    run = await start(client, settings, session([{"content": "one"}]))
    await wait_for(run, awaiting)
    with pytest.raises(InvalidInput, match="text"):
        await run.ask("   ")
    with pytest.raises(InvalidInput, match="at most 100000 characters"):
        await run.ask("x" * 100_001)
    with pytest.raises(InvalidInput, match="at most 100,000 characters"):
        await run.send("x" * 100_001)
    with pytest.raises(InvalidInput, match="message_id"):
        await run.ask("hello", message_id="")
    not_a_session = await start(client, settings, scripted("probe", [{"content": "done"}]))
    await not_a_session.result()
    with pytest.raises(Refused, match="ended DONE"):
        await not_a_session.ask("hello")
    await run.close()
    assert (await run.result()).phase == Phase.DONE
    with pytest.raises(Refused, match=f"session {run.workflow_id} has ended DONE"):
        await run.ask("after the end")
    assert len((await run.state()).session.turns.items) == 1  # nothing was taken after the end


async def test_ask_on_a_run_that_is_not_a_session_is_refused(client, settings, worker):
    run = await start(
        client, settings, scripted("control", [{"tool_calls": [call("wait", seconds=600)]}, {"content": "b"}])
    )
    await wait_for(run, lambda s: s.phase == Phase.ACTING)
    with pytest.raises(Refused, match="is not a session; `send` a message instead"):
        await run.ask("hello")
    await run.cancel()
    with pytest.raises(RunCancelled):
        await run.result()
