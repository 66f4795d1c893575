"""Fast read-only tools run as local activities: no server round trip, one marker event each;
everything with a side effect stays a regular activity, and so does every workspace tool (it runs
on the host holding the workspace, not on whichever worker holds the workflow task).
RATCHET_LOCAL_TOOLS=false turns it off, and so does a worker without a workflow cache."""

from __future__ import annotations

import uuid
from datetime import timedelta

from temporalio.client import WorkflowHandle

from ratchet.contracts import Phase
from tests.runs import scripted, start, state_of
from ratchet.worker.main import build_worker

SCRIPT = [
    {"tool_calls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "hello"}}]},
    {"tool_calls": [
        {"name": "read_file", "arguments": {"path": "a.txt"}},
        {"name": "read_file", "arguments": {"path": "missing.txt"}},
        {"name": "list_files", "arguments": {}},
        {"name": "probe_echo", "arguments": {"text": "echo"}},
    ]},
    {"content": "done"},
]


async def activity_kinds(handle: WorkflowHandle) -> tuple[list[str], int]:
    """Activity types scheduled on the server, and the number of local-activity markers."""
    scheduled, markers = [], 0
    async for event in handle.fetch_history_events():
        if event.HasField("activity_task_scheduled_event_attributes"):
            scheduled.append(event.activity_task_scheduled_event_attributes.activity_type.name)
        if event.HasField("marker_recorded_event_attributes"):
            markers += event.marker_recorded_event_attributes.marker_name == "core_local_activity"
    return scheduled, markers


async def run_probe(client, settings) -> tuple[WorkflowHandle, list[str], int]:
    handle = await start(client, settings, scripted("probe", SCRIPT, workspace="w"))
    result = await handle.result()
    assert result.phase == Phase.DONE, result.last_error
    tools = {r.call_id: r.result for r in (await state_of(handle)).tool_calls}
    assert tools["call_2_0"].ok and tools["call_2_0"].output == "hello"
    assert not tools["call_2_1"].ok and "no such file" in tools["call_2_1"].output
    assert "a.txt" in tools["call_2_2"].output
    assert tools["call_2_3"].ok and tools["call_2_3"].output == "echo"
    return handle, *await activity_kinds(handle)


async def test_read_only_tools_skip_the_server_and_side_effects_do_not(client, settings):
    cached = settings.model_copy(update={"max_cached_workflows": 10})
    async with build_worker(client, cached, graceful_shutdown_timeout=timedelta(0)):
        handle, scheduled, markers = await run_probe(client, cached)
        plan = (await state_of(handle)).plan
    assert "tool.write_file" in scheduled and scheduled.count("tool.read_file") == 2 and "tool.list_files" in scheduled
    assert "tool.probe_echo" not in scheduled, scheduled
    assert markers == 1
    assert {t.name for t in plan.tools if t.local} == {"probe_echo"}, "workspace tools are never local"


async def test_local_tools_can_be_turned_off_and_are_off_without_a_workflow_cache(client, settings, worker):
    """A worker without a workflow cache (the tests' default worker) evicts a run after every task,
    which cancels its local activities: there, every tool is a regular activity."""
    off = settings.model_copy(update={"local_tools": False, "task_queue": f"off-{uuid.uuid4().hex[:8]}", "max_cached_workflows": 10})
    async with build_worker(client, off, graceful_shutdown_timeout=timedelta(0)):
        _, scheduled, markers = await run_probe(client, off)
    assert "tool.probe_echo" in scheduled and markers == 0
    assert settings.max_cached_workflows == 0 and settings.local_tools
    _, scheduled, markers = await run_probe(client, settings)
    assert "tool.probe_echo" in scheduled and markers == 0
