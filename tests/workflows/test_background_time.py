"""Background agents on the time-skipping test server: days and weeks in seconds."""

from __future__ import annotations

import sys
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from ratchet.contracts import AgentResult, AgentState, Phase
from ratchet.payloads.converter import BASE_CONVERTER
from ratchet.worker.main import build_worker
from tests.runs import scripted, start

TEST_SERVER = Path(sys.executable).parent / "temporal-test-server"


@pytest.fixture(scope="module")
async def env():
    environment = await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=str(TEST_SERVER), data_converter=BASE_CONVERTER
    )
    yield environment
    await environment.shutdown()


@pytest.fixture
def ts_settings(settings):
    # the time-skipping server has no custom search attributes registered, and no worker deployments
    return settings.model_copy(update={"search_attributes": False, "versioning": False})


async def run_to_end(env, settings, run: dict) -> tuple[AgentResult, AgentState, timedelta]:
    async with build_worker(env.client, settings, graceful_shutdown_timeout=timedelta(0)):
        before = await env.get_current_time()
        handle = await start(env.client, settings, run, f"ts-{uuid.uuid4().hex[:8]}")
        result = await handle.result()
        state = await handle.state()
        return result, state, (await env.get_current_time()) - before


async def test_an_approval_waits_three_days_then_times_out(env, ts_settings):
    script = [{"tool_calls": [{"name": "create_ticket", "arguments": {"title": "prod: restart db"}}]}, {"content": "gave up"}]
    result, state, elapsed = await run_to_end(env, ts_settings, scripted("approver", script))
    assert result.phase == Phase.DONE
    assert elapsed >= timedelta(days=3)  # of the test server's time: the test does not wait three days
    [decision] = state.calls.decisions.values()
    assert not decision.approved and decision.by == "timeout"
    assert "a person rejected this call: no decision before the approval timeout" in state.conversation.messages.items[-2].content
    assert state.effects.stack.items == [] and state.calls.pending_approvals == []


async def test_wait_a_week_is_a_durable_timer(env, ts_settings):
    script = [{"tool_calls": [{"name": "wait", "arguments": {"seconds": 7 * 24 * 3600}}]}, {"content": "a week later"}]
    result, state, elapsed = await run_to_end(env, ts_settings, scripted("approver", script))
    assert result.phase == Phase.DONE and result.answer == "a week later"
    assert elapsed >= timedelta(days=7)
    assert state.calls.tool_calls.items[0].result.output.startswith("waited 604800s")


async def test_a_paused_run_resumes_after_a_month(env, ts_settings):
    script = [
        {"tool_calls": [{"name": "wait", "arguments": {"seconds": 60}}]},
        {"tool_calls": [{"name": "probe_append", "arguments": {"label": "a"}}]},
        {"content": "resumed"},
    ]
    async with build_worker(env.client, ts_settings, graceful_shutdown_timeout=timedelta(0)):
        handle = await start(env.client, ts_settings, scripted("approver", script, workspace="pz"), f"ts-{uuid.uuid4().hex[:8]}")
        await handle.pause()
        await env.sleep(timedelta(days=30))
        state = await handle.state()
        assert state.phase == Phase.PAUSED and state.paused
        await handle.resume()
        result = await handle.result()
    assert result.phase == Phase.DONE and result.answer == "resumed"
