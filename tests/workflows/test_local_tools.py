"""Fast read-only tools run as local activities: no server round trip, one marker event each;
everything with a side effect stays a regular activity. A read-only workspace tool runs locally
where the workflow's worker is on the host holding the workspace (a run's workspace is opened
there, by a local `workspace.open`); elsewhere it answers NotOnThisHost without acting and the
call goes to the host's queue. RATCHET_LOCAL_TOOLS=false turns it off, and so does a worker
without a workflow cache."""

from __future__ import annotations

import uuid
from datetime import timedelta

from temporalio.api.enums.v1 import PendingActivityState
from temporalio.client import Client
from temporalio.runtime import Runtime, TelemetryConfig
from temporalio.worker import Replayer

from ratchet.client import RunHandle
from ratchet.contracts import ErrorType, Phase
from ratchet.worker.main import build_worker
from ratchet.workflows.agent import AgentWorkflow
from tests.runs import scripted, start, until

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


async def activity_kinds(handle: RunHandle) -> tuple[list[str], int]:
    """Activity types scheduled on the server, and the number of local-activity markers."""
    scheduled, markers = [], 0
    for event in (await handle.history()).events:
        if event.HasField("activity_task_scheduled_event_attributes"):
            scheduled.append(event.activity_task_scheduled_event_attributes.activity_type.name)
        if event.HasField("marker_recorded_event_attributes"):
            markers += event.marker_recorded_event_attributes.marker_name == "core_local_activity"
    return scheduled, markers


async def scheduled_queues(handle: RunHandle) -> list[tuple[str, str]]:
    """(activity type, task queue) of every activity scheduled on the server."""
    found = []
    for event in (await handle.history()).events:
        if event.HasField("activity_task_scheduled_event_attributes"):
            attrs = event.activity_task_scheduled_event_attributes
            found.append((attrs.activity_type.name, attrs.task_queue.name))
    return found


async def activity_failures(handle: RunHandle) -> list[str]:
    """The failure types of activities that failed on the server."""
    types = []
    for event in (await handle.history()).events:
        if event.HasField("activity_task_failed_event_attributes"):
            types.append(event.activity_task_failed_event_attributes.failure.application_failure_info.type)
    return types


async def local_failures(handle: RunHandle) -> list[str]:
    """The failure types of local activities that failed (their markers carry the failure)."""
    types = []
    for event in (await handle.history()).events:
        attrs = event.marker_recorded_event_attributes
        if event.HasField("marker_recorded_event_attributes") and attrs.HasField("failure"):
            failure = attrs.failure
            while failure.HasField("cause"):
                failure = failure.cause
            types.append(failure.application_failure_info.type)
    return types


async def waits_for(handle: RunHandle, activity_type: str) -> bool:
    """An activity of this type is scheduled and no worker has taken it."""
    return any(a.activity_type.name == activity_type and a.state == PendingActivityState.PENDING_ACTIVITY_STATE_SCHEDULED
               for a in (await handle.describe()).raw_description.pending_activities)


async def run_probe(client, settings) -> tuple[RunHandle, list[str], int]:
    handle = await start(client, settings, scripted("probe", SCRIPT, workspace="w"))
    result = await handle.result()
    assert result.phase == Phase.DONE, result.last_error
    tools = {r.call_id: r.result for r in (await handle.state()).calls.tool_calls.items}
    assert tools["call_2_0"].ok and tools["call_2_0"].output == "hello"
    assert not tools["call_2_1"].ok and "no such file" in tools["call_2_1"].output
    assert "a.txt" in tools["call_2_2"].output
    assert tools["call_2_3"].ok and tools["call_2_3"].output == "echo"
    return handle, *await activity_kinds(handle)


async def test_read_only_tools_skip_the_server_and_side_effects_do_not(client, settings):
    cached = settings.model_copy(update={"max_cached_workflows": 10})
    async with build_worker(client, cached, graceful_shutdown_timeout=timedelta(0)):
        handle, scheduled, markers = await run_probe(client, cached)
        plan = (await handle.state()).plan
    # the write goes to the run's own queue (the worker that scheduled it takes it eagerly), not the host's
    assert ("tool.write_file", settings.task_queue) in await scheduled_queues(handle)
    assert "tool.write_file" in scheduled, "a side effect is never local"
    assert not {"tool.read_file", "tool.list_files", "tool.probe_echo", "workspace.open"} & set(scheduled), scheduled
    assert markers == 5  # workspace.open, read_file twice, list_files, probe_echo
    assert {t.name for t in plan.tools if t.local} == {"probe_echo", "read_file", "list_files"}
    assert plan.local_activities


async def test_a_read_only_workspace_tool_on_another_hosts_workspace_goes_to_that_host(client, settings, tmp_path, dev_server):
    """The workflow runs on host A's worker, the workspace is on host B (a sub-agent's parent's
    host): each read is tried locally on A, answered NotOnThisHost without acting, and then runs
    on B's queue, in B's workspace."""
    cached = settings.model_copy(update={"max_cached_workflows": 10})
    host_a = cached.model_copy(update={"host_id": "host-a", "workspace_root": tmp_path / "a"})
    host_b = cached.model_copy(update={"host_id": "host-b", "workspace_root": tmp_path / "b"})
    b_queue = f"{settings.task_queue}@host-b"
    run = scripted("probe", SCRIPT, workspace="w", workspace_host=b_queue)
    async with build_worker(client, host_a, graceful_shutdown_timeout=timedelta(0)):
        handle = await start(client, settings, run)
        await until(lambda: waits_for(handle, "workspace.open"), "host A took the run (it is sticky there now); B is not up yet")
        other = await Client.connect(dev_server.address, data_converter=client.data_converter,
                                     runtime=Runtime(telemetry=TelemetryConfig()))  # one worker per queue and runtime
        async with build_worker(other, host_b, graceful_shutdown_timeout=timedelta(0)):
            result = await handle.result()
        tools = {r.call_id: r.result for r in (await handle.state()).calls.tool_calls.items}
    assert result.phase == Phase.DONE and result.workspace_host == b_queue, result.last_error
    assert tools["call_2_0"].output == "hello" and "a.txt" in tools["call_2_2"].output
    assert (tmp_path / "b" / "w" / "a.txt").read_text() == "hello" and not (tmp_path / "a" / "w" / "a.txt").exists()
    queues = await scheduled_queues(handle)
    on_b = [kind for kind, queue in queues if queue == b_queue]
    assert sorted(on_b) == ["tool.list_files", "tool.read_file", "tool.read_file", "tool.write_file", "workspace.open"]
    assert await local_failures(handle) == [ErrorType.NOT_ON_THIS_HOST] * 3
    # the write was first sent to the run's queue: A's worker took it and answered NotOnThisHost without acting
    assert ("tool.write_file", settings.task_queue) in queues and await activity_failures(handle) == [ErrorType.NOT_ON_THIS_HOST]
    # the misses are recorded: the history replays on a worker of any host
    replayer = Replayer(workflows=[AgentWorkflow], data_converter=client.data_converter)
    await replayer.replay_workflow(await handle.history())


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
