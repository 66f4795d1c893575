"""Handoffs to a person's inbox (issue #43, item 5): the run parks in AWAITING_PERSON with the
handoff record, is found in the person's inbox (the RatchetHandedTo search attribute), and the
person finishes it, replies to the agent, or hands it back to a profile with their notes; a
rollback across it undoes both sides' effects newest first (dev server, scripted model; profiles
`asker`, `fixer` and `asks_nobody`, tests/plugins/probe.py)."""

from __future__ import annotations

import pytest

from ratchet.client import InvalidInput, Refused, RunFailed
from ratchet.contracts import Phase
from tests.runs import call, ratchet, runs, scripted, start, until, wait_for

TO_ALICE = call(
    "handoff",
    to="person:alice",
    summary="a.txt written; which API version?",
    constraints=["touch only the workspace"],
    open_questions=["v1 or v2?"],
)


def parked(state):
    return state.phase == Phase.AWAITING_PERSON


async def test_a_run_handed_to_a_person_waits_in_their_inbox_until_they_hand_it_back(client, settings, worker):
    script = [
        {"tool_calls": [call("write_file", path="a.txt", content="a\n")]},
        {"tool_calls": [TO_ALICE]},
        {"tool_calls": [call("write_file", path="b.txt", content="v2\n")]},  # the fixer, after alice
        {"content": "fixed with v2"},
    ]
    run = await start(client, settings, scripted("asker", script, workspace="person-back"))
    state = await wait_for(run, parked)
    [handoff] = state.handoffs
    assert (handoff.from_agent, handoff.to_agent, handoff.step) == ("asker", "person:alice", 2)
    assert handoff.evidence[0].startswith("cp-1") and handoff.open_questions == ["v1 or v2?"]
    ratchet_client = runs(client, settings)
    listed = await until(
        lambda: ratchet_client.list(query=f'WorkflowId="{run.workflow_id}" AND RatchetHandedTo IS NOT NULL'),
        "listed as handed",
    )
    assert (listed[0].phase, listed[0].handed_to) == ("AWAITING_PERSON", "person:alice")
    [item] = [i for i in await ratchet_client.inbox(person="alice") if i.workflow_id == run.workflow_id]
    assert item.handoff.summary == "a.txt written; which API version?" and item.agent == "asker"
    assert run.workflow_id not in {i.workflow_id for i in await ratchet_client.inbox(person="bob")}
    assert "Handed to `person:alice` by asker" in await run.current_details()
    code, out = await ratchet(settings, "inbox", "--person", "alice")
    assert (
        code == 0 and f"{run.workflow_id}: handed to person:alice by asker" in out and "open question: v1 or v2?" in out
    )

    with pytest.raises(Refused, match="to: cannot hand back to 'triager': the run may go back to asker, fixer"):
        await run.respond("hand_back", "x", to="triager", by="alice")
    assert (await run.state()).phase == Phase.AWAITING_PERSON  # nothing changed

    code, out = await ratchet(
        settings, "respond", run.workflow_id, "--hand-back", "fixer", "--notes", "use v2", "--by", "alice"
    )
    assert code == 0, out
    result = await run.result()
    assert result.phase == Phase.DONE and result.answer == "fixed with v2"
    state = await run.state()
    assert state.plan.agent == "fixer" and [h.to_agent for h in state.handoffs] == ["person:alice", "fixer"]
    assert state.handoffs[0].response.by == "alice" and state.handoffs[1].from_agent == "person:alice"
    page = await run.transcript(0, 50)
    told = [m.content for m in page.messages if m.role == "user" and (m.content or "").startswith("[Handoff")]
    assert len(told) == 1 and told[0].startswith("[Handoff from person:alice to fixer") and "Summary: use v2" in told[0]
    assert (settings.workspace_root / "person-back" / "b.txt").read_text() == "v2\n"
    events = [e async for e in run.stream(topics=["steps", "answer"])]
    [asked] = [e for e in events if e.kind == "handoff_requested"]  # also what `notify` can be told of
    assert (asked.step, asked.to, asked.from_agent) == (2, "person:alice", "asker")
    assert [e.phase for e in events if e.kind == "phase"].count("AWAITING_PERSON") == 1
    gone = f'WorkflowId="{run.workflow_id}" AND RatchetHandedTo IS NULL'
    await until(lambda: ratchet_client.list(query=gone), "RatchetHandedTo unset")


async def test_a_person_replies_to_the_agent_and_then_finishes_the_task(client, settings, worker):
    script = [
        {"tool_calls": [call("handoff", to="role:reviewers", summary="draft ready")]},
        {"tool_calls": [call("handoff", to="person:alice", summary="reviewed; ship it?")]},
        {"content": "not reached: alice finishes it"},
    ]
    run = await start(client, settings, scripted("asker", script))
    await wait_for(run, parked)
    ratchet_client = runs(client, settings)
    await until(
        lambda: _in(ratchet_client, run, role="reviewers"),
        "in the reviewers' inbox",
    )
    assert await run.respond("reply", "looks good; ask alice", by="bob") == (
        f"reply: {run.workflow_id} handed to role:reviewers"
    )
    await wait_for(run, lambda s: parked(s) and len(s.handoffs) == 2)
    await run.respond("finish", "shipped as is", by="alice")
    result = await run.result()
    assert (result.phase, result.answer, result.steps) == (Phase.DONE, "shipped as is", 2)
    page = await run.transcript(0, 50)
    assert any(m.content == "[bob answered your handoff]\nlooks good; ask alice" for m in page.messages)


async def _in(ratchet_client, run, **which) -> bool:
    return run.workflow_id in {i.workflow_id for i in await ratchet_client.inbox(**which)}


async def test_a_rollback_across_a_person_handoff_undoes_both_sides_newest_first(client, settings, worker):
    script = [
        {"tool_calls": [call("write_file", path="a.txt", content="a\n")]},
        {"tool_calls": [TO_ALICE]},
        {"tool_calls": [call("write_file", path="b.txt", content="b\n")]},
        {"tool_calls": [call("wait", seconds=600)]},
        {"content": "done"},
    ]
    run = await start(client, settings, scripted("asker", script, workspace="person-rollback"))
    await wait_for(run, parked)
    await run.respond("hand_back", "go on", to="fixer", by="alice")
    await wait_for(run, lambda s: s.plan.agent == "fixer" and len(s.effects.stack.items) == 2)
    outcome = await run.rollback("start", then="stop")
    undone = [u.split(" (")[0] for u in outcome.report.undone]
    assert undone == ["step 3 write_file", "step 1 write_file"], outcome.report.undone
    state = await run.state()
    assert state.phase == Phase.ROLLED_BACK and state.plan.agent == "asker" and state.handoffs == []
    workspace = settings.workspace_root / "person-rollback"
    assert not (workspace / "a.txt").exists() and not (workspace / "b.txt").exists()


async def test_a_rollback_while_parked_takes_the_run_out_of_the_inbox(client, settings, worker):
    script = [
        {"tool_calls": [call("write_file", path="a.txt", content="a\n")]},
        {"tool_calls": [TO_ALICE]},  # again after the rollback: the script replays from cp-1
        {"content": "not reached"},
    ]
    run = await start(client, settings, scripted("asker", script, workspace="person-parked"))
    await wait_for(run, parked)
    outcome = await run.rollback("cp-1", then="continue")
    assert outcome.report.undone == []  # nothing after cp-1 but the handoff itself, which goes
    state = await wait_for(run, lambda s: parked(s) and s.handoffs[0].step == 3)
    assert len(state.handoffs) == 1 and len(state.effects.rollbacks) == 1
    await run.respond("finish", "done by hand", by="alice")
    assert (await run.result()).answer == "done by hand"


async def test_bad_handoffs_to_people_are_refused_and_change_nothing(client, settings, worker):
    script = [
        {"tool_calls": [call("handoff", to="person:bob", summary="x")]},
        {"tool_calls": [call("wait", seconds=600)]},
    ]
    run = await start(client, settings, scripted("asker", script))
    state = await wait_for(run, lambda s: len(s.calls.tool_calls.items) == 1)
    [record] = state.calls.tool_calls.items
    assert (
        record.result.output
        == "cannot hand off to 'person:bob': asker hands off to fixer, person:alice, role:reviewers"
    )
    assert state.handoffs == [] and state.plan.agent == "asker"
    with pytest.raises(Refused, match="is not handed to a person"):
        await run.respond("finish", "x")
    with pytest.raises(InvalidInput, match="to: .*hand_back names the profile"):
        await run.respond("hand_back", "notes")
    with pytest.raises(InvalidInput, match="person: letters, digits"):
        await runs(client, settings).inbox(person="a b")
    await run.terminate("test over")
    nobody = await start(client, settings, scripted("asks_nobody", [{"content": "x"}]))
    with pytest.raises(RunFailed, match="handoffs: 'person:' is not a person's inbox"):
        await nobody.result()


async def test_an_answer_given_while_the_run_is_paused_is_taken_once_it_resumes(client, settings, worker):
    script = [{"tool_calls": [call("handoff", to="person:alice", summary="ok?")]}, {"content": "went on"}]
    run = await start(client, settings, scripted("asker", script))
    await wait_for(run, parked)
    await run.pause()
    await wait_for(run, lambda s: s.phase == Phase.PAUSED)
    await run.respond("reply", "yes, go on", by="alice")
    state = await run.state()
    assert state.phase == Phase.PAUSED and state.handoffs[0].response.text == "yes, go on"
    with pytest.raises(Refused, match="already answered by alice"):
        await run.respond("finish", "no", by="bob")
    await run.resume()
    result = await run.result()
    assert (result.phase, result.answer) == (Phase.DONE, "went on")
    phases = [e.phase for e in [e async for e in run.stream(topics=["steps"])] if e.kind == "phase"]
    assert phases.count("AWAITING_PERSON") == 1  # not parked again: the answer was there


async def test_a_person_who_never_answers_leaves_the_run_to_its_time_budget(client, settings, worker):
    script = [{"tool_calls": [call("handoff", to="role:reviewers", summary="anyone?")]}, {"content": "not reached"}]
    run = await start(client, settings, scripted("asker", script, budget={"max_duration_s": 2}))
    result = await run.result()
    assert result.phase == Phase.BUDGET_EXHAUSTED and result.steps == 1
    assert (await run.state()).handoffs[0].waiting  # nobody answered; the run is closed, in nobody's inbox
    ratchet_client = runs(client, settings)
    unset = f'WorkflowId="{run.workflow_id}" AND RatchetHandedTo IS NULL AND RatchetPhase="BUDGET_EXHAUSTED"'
    await until(lambda: ratchet_client.list(query=unset), "RatchetHandedTo unset as the run closed")
