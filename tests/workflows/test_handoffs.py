"""Handoffs (issue #43, item 5): a run goes on under another profile, same history, budget and
workspace, the handoff record in the state and in the conversation; a rollback across it undoes
both profiles' effects newest first and brings the first profile back (dev server, scripted model;
profiles `triager` and `fixer`, tests/plugins/probe.py)."""

from __future__ import annotations

import pytest

from ratchet.client import RunFailed
from ratchet.contracts import Phase
from tests.runs import call, scripted, start, wait_for

HANDOFF = call(
    "handoff",
    to="fixer",
    summary="a.txt written; the fix is left",
    constraints=["touch only the workspace"],
    open_questions=["is b.txt needed?"],
)


async def test_a_handoff_goes_on_under_the_target_profile_with_the_record(client, settings, worker):
    script = [
        {"tool_calls": [call("write_file", path="a.txt", content="a\n")]},
        {"tool_calls": [HANDOFF]},
        {"tool_calls": [call("create_ticket", title="not the fixer's")]},
        {"tool_calls": [call("write_file", path="b.txt", content="b\n")]},
        {"content": "fixed"},
    ]
    run = await start(client, settings, scripted("triager", script, workspace="handoff-ws"))
    result = await run.result()
    assert result.phase == Phase.DONE and result.answer == "fixed"
    state = await run.state()
    assert state.plan.agent == "fixer" and state.plan.budget.max_steps == 30
    assert [t.name for t in state.plan.retired_tools] == ["create_ticket"]
    [handoff] = state.handoffs
    assert (handoff.from_agent, handoff.to_agent, handoff.step) == ("triager", "fixer", 2)
    assert handoff.evidence and handoff.evidence[0].startswith("cp-1")
    assert handoff.constraints == ["touch only the workspace"] and handoff.plan_before.agent == "triager"
    records = {r.tool: r for r in state.calls.tool_calls.items}
    assert records["handoff"].result.output.startswith("handed off to fixer") and "create_ticket" not in records
    page = await run.transcript(0, 50)
    refused = [m.content for m in page.messages if m.role == "tool" and "unknown tool 'create_ticket'" in (m.content or "")]
    assert len(refused) == 1  # the fixer is not offered the triager's tool
    told = [m.content for m in page.messages if m.role == "user" and (m.content or "").startswith("[Handoff")]
    assert len(told) == 1 and "You now act as agent fixer: You are the fixer." in told[0]
    assert "Open questions:\n- is b.txt needed?" in told[0]
    assert (settings.workspace_root / "handoff-ws" / "b.txt").read_text() == "b\n"


async def test_a_rollback_across_a_handoff_undoes_both_sides_and_restores_the_first_profile(client, settings, worker):
    script = [
        {"tool_calls": [call("write_file", path="a.txt", content="a\n")]},
        {"tool_calls": [HANDOFF]},
        {"tool_calls": [call("write_file", path="b.txt", content="b\n")]},
        {"tool_calls": [call("wait", seconds=600)]},
        {"content": "done"},
    ]
    run = await start(client, settings, scripted("triager", script, workspace="handoff-back"))
    await wait_for(run, lambda s: s.plan is not None and s.plan.agent == "fixer" and len(s.effects.stack.items) == 2)
    outcome = await run.rollback("start", then="stop")
    undone = [u.split(" (")[0] for u in outcome.report.undone]
    assert undone == ["step 3 write_file", "step 1 write_file"], outcome.report.undone  # the fixer's, then the triager's
    assert (await run.result()).phase == Phase.ROLLED_BACK
    state = await run.state()
    assert state.plan.agent == "triager" and state.handoffs == []
    workspace = settings.workspace_root / "handoff-back"
    assert not (workspace / "a.txt").exists() and not (workspace / "b.txt").exists()


async def test_a_handoff_to_a_profile_not_named_goes_back_to_the_model(client, settings, worker):
    script = [{"tool_calls": [call("handoff", to="ops", summary="x")]}, {"content": "stayed"}]
    run = await start(client, settings, scripted("triager", script))
    assert (await run.result()).answer == "stayed"
    state = await run.state()
    [record] = state.calls.tool_calls.items
    assert not record.result.ok and record.result.output == "cannot hand off to 'ops': triager hands off to fixer"
    assert state.plan.agent == "triager" and state.handoffs == []


async def test_a_profile_with_the_handoff_tool_and_no_target_is_refused(client, settings, worker):
    run = await start(client, settings, scripted("hands_nowhere", [{"content": "x"}]))
    with pytest.raises(RunFailed, match="the handoff tool and `handoffs` .its targets. go together"):
        await run.result()
