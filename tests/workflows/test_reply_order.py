"""The calls of one model reply: side effects in the reply's order, reads beside each other."""

from __future__ import annotations

import pytest

from ratchet.client import RunFailed
from ratchet.contracts import Phase
from tests.runs import call, scripted, start


async def tool_activities(handle) -> list[dict]:
    """Each tool activity of the run in scheduling order: its type, the workflow task that
    scheduled it, and the event that closed it."""
    history = await handle.history()
    tasks_completed, acts, by_id = 0, [], {}
    for event in history.events:
        if event.HasField("workflow_task_completed_event_attributes"):
            tasks_completed = event.event_id
        attrs = event.activity_task_scheduled_event_attributes
        if event.HasField("activity_task_scheduled_event_attributes") and attrs.activity_type.name.startswith("tool."):
            by_id[event.event_id] = {"type": attrs.activity_type.name, "task": tasks_completed, "closed": None}
            acts.append(by_id[event.event_id])
        if event.HasField("activity_task_completed_event_attributes"):
            scheduled = event.activity_task_completed_event_attributes.scheduled_event_id
            if scheduled in by_id:
                by_id[scheduled]["closed"] = event.event_id
    return acts


async def test_a_read_after_a_write_sees_it_and_writes_of_one_path_run_in_the_replys_order(client, settings, worker):
    """[write a, read a, read b, write a]: the reads run together after the first write, the
    second write after both reads; the failure policy then undoes both writes, newest first."""
    ws = settings.workspace_root / "order"
    ws.mkdir(parents=True)
    (ws / "a.txt").write_text("orig")
    (ws / "b.txt").write_text("bee")
    script = [
        {"tool_calls": [
            call("write_file", path="a.txt", content="v1"), call("read_file", path="a.txt"),
            call("read_file", path="b.txt"), call("write_file", path="a.txt", content="v2"),
        ]},
        {"tool_calls": [call("probe_fatal", note="stop here")]},
    ]
    handle = await start(client, settings, scripted("saga", script, workspace="order", on_failure="rollback_all"))
    with pytest.raises(RunFailed):
        await handle.result()
    state = await handle.state()
    outputs = [r.result.output for r in state.calls.tool_calls.items if r.step == 1]
    assert "v1" in outputs[1] and "bee" in outputs[2], outputs
    write1, read_a, read_b, write2 = (await tool_activities(handle))[:4]
    assert [a["type"] for a in (write1, read_a, read_b, write2)] == ["tool.write_file", "tool.read_file", "tool.read_file", "tool.write_file"]
    assert read_a["task"] == read_b["task"] > write1["closed"]  # after the write, beside each other
    assert write2["task"] > max(read_a["closed"], read_b["closed"])
    # both writes were recorded in order, so the rollback restores what was there before the run
    assert state.phase == Phase.FAILED and state.effects.rollbacks[-1].clean and len(state.effects.rollbacks[-1].undone) == 2
    assert (ws / "a.txt").read_text() == "orig"
