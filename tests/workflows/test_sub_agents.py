"""Sub-agents: a child AgentWorkflow per delegate call, budgets over the tree, compensation."""

from __future__ import annotations

import sqlite3

import pytest

from ratchet.activities.tracker_tools import TrackerSettings
from ratchet.client import RunCancelled
from ratchet.contracts import AgentResult, Phase
from tests.runs import runs, scripted, start, wait_for

CHILD_SCRIPT = [
    {"tool_calls": [{"name": "write_file", "arguments": {"path": "child.txt", "content": "from the child"}},
                    {"name": "create_ticket", "arguments": {"title": "child ticket"}}]},
    {"content": "child finished"},
]


def delegate(**arguments) -> dict:
    return {"tool_calls": [{"name": "delegate", "arguments": arguments}]}


def tickets(settings) -> list[str]:
    with sqlite3.connect(TrackerSettings().path) as conn:
        return [t for (t,) in conn.execute("SELECT title FROM tickets")]


async def test_cancelling_the_parent_compensates_the_childs_effects(client, settings, worker):
    script = [
        delegate(agent="saga", objective="make child.txt", model={"provider": "scripted", "options": {"script": CHILD_SCRIPT}}),
        {"tool_calls": [{"name": "probe_wait", "arguments": {"seconds": 30}}]},
    ]
    handle = await start(client, settings, scripted("boss", script, workspace="tree"))
    await wait_for(handle, lambda s: s.step == 2 and s.used.steps >= 4)  # step 2 counts once its model call is in
    state = await handle.state()
    assert "sub-agent" in state.calls.tool_calls.items[0].result.output and "child finished" in state.calls.tool_calls.items[0].result.output
    assert state.used.steps == 2 + 2, "the child's two steps are charged to the parent"
    assert (settings.workspace_root / "tree" / "child.txt").exists() and tickets(settings) == ["child ticket"]

    await handle.cancel()
    with pytest.raises(RunCancelled):
        await handle.result()
    state = await handle.state()
    assert state.phase == Phase.CANCELLED and state.effects.rollbacks[-1].clean
    assert not (settings.workspace_root / "tree" / "child.txt").exists()
    assert tickets(settings) == []


async def test_a_child_gets_only_the_parents_remaining_budget(client, settings, worker):
    forever = [{"tool_calls": [{"name": "probe_append", "arguments": {"label": str(i)}}]} for i in range(20)]
    script = [delegate(agent="probe", objective="loop", model={"provider": "scripted", "options": {"script": forever}}), {"content": "ok"}]
    handle = await start(client, settings, scripted("boss", script, workspace="b", budget={"max_steps": 5}))
    result: AgentResult = await handle.result()
    state = await handle.state()
    assert "ended BUDGET_EXHAUSTED after 4 steps" in state.calls.tool_calls.items[0].result.output
    assert result.phase == Phase.BUDGET_EXHAUSTED and state.used.steps == 5


async def test_cancelling_the_parent_cancels_a_running_child_which_compensates(client, settings, worker):
    child_script = CHILD_SCRIPT[:1] + [{"tool_calls": [{"name": "probe_wait", "arguments": {"seconds": 30}}]}]
    script = [delegate(agent="saga", objective="slow child", model={"provider": "scripted", "options": {"script": child_script}})]
    handle = await start(client, settings, scripted("boss", script, workspace="tree2"))
    child = runs(client, settings).get(f"{handle.workflow_id}/1/call_1_0/child")
    await wait_for(handle, lambda s: any(e.tool == "delegate" for e in s.effects.stack.items))
    await wait_for(child, lambda s: s.step == 2)  # the child starts right after its effect is registered
    assert tickets(settings) == ["child ticket"]
    await handle.cancel()
    with pytest.raises(RunCancelled):
        await handle.result()
    child_state = await child.state()
    assert child_state.phase == Phase.CANCELLED and child_state.effects.rollbacks[-1].clean
    assert not (settings.workspace_root / "tree2" / "child.txt").exists()
    assert tickets(settings) == []
    assert (await handle.state()).phase == Phase.CANCELLED
