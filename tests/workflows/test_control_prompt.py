"""A rollback, a pause or a cancel is served at once, not at the next step boundary: it interrupts
an approval wait or a `wait` timer, and cancels a running tool through its heartbeat before
anything is undone (dev server, real time). What shows it was served at once is what the run and
the tool record, not a stopwatch: the tool logs `stopped` (it would have slept 60 s and logged
`noted`), its activity ends cancelled, the wait's result says it was interrupted."""

from __future__ import annotations

import pytest
from temporalio.api.enums.v1 import EventType

from ratchet.client import RunCancelled
from ratchet.contracts import ErrorType, Phase
from tests.plugins.probe import PROBE_LOG
from tests.runs import call, scripted, start, until, wait_for

FIRST_CHECKPOINT = {"tool_calls": [call("write_file", path="a.txt", content="v1")]}


def log(settings, workspace: str) -> list[str]:
    path = settings.workspace_root / workspace / PROBE_LOG
    return [line.split()[0] for line in path.read_text().splitlines()] if path.exists() else []


async def tool_cancelled(handle, activity_type: str) -> bool:
    """The history shows an activity of this type that ended cancelled (it was stopped mid-way)."""
    scheduled = {}
    for event in (await handle.history()).events:
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            scheduled[event.event_id] = event.activity_task_scheduled_event_attributes.activity_type.name
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_CANCELED:
            if scheduled.get(event.activity_task_canceled_event_attributes.scheduled_event_id) == activity_type:
                return True
    return False


async def test_a_rollback_stops_a_running_tool_before_undoing_it(client, settings, worker):
    script = [FIRST_CHECKPOINT, {"tool_calls": [call("slow_note", note="n", seconds=60)]}, {"content": "never"}]
    handle = await start(client, settings, scripted("control", script, workspace="ctl-tool"))
    await wait_for(handle, lambda s: s.step == 2 and len(s.effects.stack.items) == 2)
    await until(lambda: "start" in log(settings, "ctl-tool"), "the tool is running")
    report = (await handle.rollback("cp-1", then="stop")).report
    assert [u.split()[2] for u in report.undone] == ["slow_note"]
    assert (await handle.result()).phase == Phase.ROLLED_BACK
    # the undo ran after the tool had stopped, never beside it
    assert log(settings, "ctl-tool") == ["start", "stopped", "undone"]
    assert await tool_cancelled(handle, "tool.slow_note")


async def test_a_cancel_stops_a_running_tool_before_undoing_it(client, settings, worker):
    script = [{"tool_calls": [call("slow_note", note="n", seconds=60)]}, {"content": "never"}]
    handle = await start(client, settings, scripted("control", script, workspace="ctl-cancel", on_failure="rollback_all"))
    await wait_for(handle, lambda s: len(s.effects.stack.items) == 1)
    await until(lambda: "start" in log(settings, "ctl-cancel"), "the tool is running")
    await handle.cancel()
    with pytest.raises(RunCancelled):
        await handle.result()
    state = await handle.state()
    assert state.phase == Phase.CANCELLED and state.effects.rollbacks[-1].clean
    assert log(settings, "ctl-cancel") == ["start", "stopped", "undone"]
    assert await tool_cancelled(handle, "tool.slow_note")


async def test_a_rollback_interrupts_an_approval_wait(client, settings, worker):
    script = [FIRST_CHECKPOINT, {"tool_calls": [call("create_ticket", title="prod: restart db")]}, {"content": "never"}]
    handle = await start(client, settings, scripted("control", script, workspace="ctl-appr"))
    await wait_for(handle, lambda s: len(s.calls.pending_approvals) == 1)
    report = (await handle.rollback("cp-1", then="stop")).report  # no one approves: the wait is interrupted
    assert report.clean
    assert (await handle.result()).phase == Phase.ROLLED_BACK
    state = await handle.state()
    assert state.calls.pending_approvals == [] and state.effects.stack.items[-1].tool == "write_file"


async def test_a_pause_interrupts_a_wait_and_the_model_is_told(client, settings, worker):
    script = [{"tool_calls": [call("wait", seconds=3600)]}, {"content": "resumed"}]
    handle = await start(client, settings, scripted("control", script, workspace="ctl-pause"))
    await wait_for(handle, lambda s: s.phase == Phase.ACTING)
    await handle.pause()
    await wait_for(handle, lambda s: s.phase == Phase.PAUSED, timeout=60)  # long before the wait's hour is up
    await handle.resume()
    result = await handle.result()
    assert result.phase == Phase.DONE and result.answer == "resumed"
    state = await handle.state()
    [wait] = state.calls.tool_calls.items
    assert wait.result.error_type == ErrorType.INTERRUPTED
    assert [m.content for m in state.conversation.messages.items if m.role == "tool"] == [f"ERROR: {wait.result.output}"]
