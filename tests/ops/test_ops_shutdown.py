"""SIGTERM drains a worker process: no new tasks, running activities finish or are cancelled
after the grace period, exit code 0."""

from __future__ import annotations

import asyncio
import signal
from datetime import timedelta

import pytest
from temporalio.api.enums.v1 import EventType

from ratchet.contracts import AgentResult, Phase
from ratchet.worker.main import build_worker
from tests.ops_workers import start_worker
from tests.runs import activity_attempts, scripted, start, until, wait_for_running_activity

pytestmark = pytest.mark.e2e  # processes as a user runs them: `make test-e2e`, not `make test`

def wait_script(seconds: float) -> list[dict]:
    return [{"tool_calls": [{"name": "probe_wait", "arguments": {"seconds": seconds}}]}, {"content": "waited"}]


async def test_sigterm_lets_the_running_activity_finish_takes_no_new_task_and_exits_0(client, settings):
    worker = await start_worker(settings, RATCHET_SHUTDOWN_GRACE_S="20")
    handle = await start(client, settings, scripted("priced", wait_script(2.5)))
    await wait_for_running_activity(handle, "tool.probe_wait")
    assert await worker.stop(timeout=20 + 10) == 0, worker.output
    assert "draining" in worker.output and "drained" in worker.output

    events = (await handle.history()).events
    scheduled = {
        e.event_id: e.activity_task_scheduled_event_attributes.activity_type.name
        for e in events if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    }
    completed = [
        scheduled[e.activity_task_completed_event_attributes.scheduled_event_id]
        for e in events if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED
    ]
    assert completed[-1] == "tool.probe_wait", "the running activity finished on the draining worker"
    assert events[-1].event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, (
        "the workflow task that follows was left for another worker"
    )

    async with build_worker(client, settings, graceful_shutdown_timeout=timedelta(0)):
        result: AgentResult = await asyncio.wait_for(handle.result(), 20)
        state = await handle.state()
    assert result.phase == Phase.DONE and result.answer == "waited"
    assert state.calls.tool_calls.items[0].result.output == "waited 2.5s"
    assert await activity_attempts(handle, "tool.probe_wait") == [1], "finished once, not retried"


async def test_an_activity_longer_than_the_grace_period_is_cancelled_and_the_worker_still_exits_0(client, settings):
    """The cancelled attempt fails as `WorkerShutdown`; Temporal retries it on another worker."""
    worker = await start_worker(settings, RATCHET_SHUTDOWN_GRACE_S="0.5")
    handle = await start(client, settings, scripted("priced", wait_script(30)))
    try:
        await wait_for_running_activity(handle, "tool.probe_wait")
        assert await worker.stop(timeout=10) == 0, worker.output
        # cancelled after the 0.5 s grace, not let run its 30 s: the attempt failed as WorkerShutdown
        [pending] = (await handle.describe()).raw_description.pending_activities
        assert pending.attempt == 2 and pending.last_failure.application_failure_info.type == "WorkerShutdown"
    finally:
        await handle.terminate("test over")


async def test_a_second_signal_stops_at_once_with_exit_1(client, settings):
    worker = await start_worker(settings, RATCHET_SHUTDOWN_GRACE_S="60")
    handle = await start(client, settings, scripted("priced", wait_script(30)))
    try:
        await wait_for_running_activity(handle, "tool.probe_wait")
        worker.proc.send_signal(signal.SIGTERM)
        await until(lambda: "draining" in worker.output, "the worker drains")
        assert await worker.stop(signal.SIGINT, timeout=10) == 1, worker.output
        assert "stopped before running activities finished" in worker.output
    finally:
        await handle.terminate("test over")
