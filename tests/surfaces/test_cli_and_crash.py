"""As a user would: the real `temporal` CLI, and a worker process killed with SIGKILL mid-run."""

from __future__ import annotations

import asyncio
import json
import signal
import uuid

import pytest

from ratchet.contracts import AGENT_WORKFLOW, STATE_VERSION, AgentResult, Phase
from tests.ops_workers import start_worker
from tests.plugins.probe import PROBE_LOG
from tests.runs import scripted, start, temporal_cli, until, wait_for

pytestmark = pytest.mark.e2e  # slow: `make test-e2e`, not `make test`

async def test_temporal_cli_starts_queries_and_reads_a_run(dev_server, settings, worker):
    wid = f"cli-{uuid.uuid4().hex[:8]}"
    run = scripted("probe", [{"tool_calls": [{"name": "probe_append", "arguments": {"label": "a"}}]}, {"content": "fine"}])
    code, out = await temporal_cli(
        dev_server.address, "workflow", "start", "--type", AGENT_WORKFLOW, "--task-queue", settings.task_queue,
        "--workflow-id", wid, "--input", json.dumps(run),
    )
    assert code == 0, out
    code, out = await temporal_cli(dev_server.address, "workflow", "result", "--workflow-id", wid, "--output", "json")
    assert code == 0, out
    assert '"DONE"' in out and '"fine"' in out
    code, out = await temporal_cli(
        dev_server.address, "workflow", "query", "--workflow-id", wid, "--name", "state", "--output", "json"
    )
    assert code == 0, out
    state = json.loads(out)["queryResult"][0]
    assert state["v"] == STATE_VERSION and state["phase"] == "DONE"
    assert state["calls"]["tool_calls"]["items"][0]["tool"] == "probe_append"


async def test_temporal_cli_malformed_input_fails_at_once_naming_the_field(dev_server, settings, worker):
    wid = f"cli-bad-{uuid.uuid4().hex[:8]}"
    bad = {"agent": "probe", "objective": "x", "budget": {"max_steps": "many"}}
    code, out = await temporal_cli(
        dev_server.address, "workflow", "start", "--type", AGENT_WORKFLOW, "--task-queue", settings.task_queue,
        "--workflow-id", wid, "--input", json.dumps(bad),
    )
    assert code == 0, out
    code, out = await asyncio.wait_for(
        temporal_cli(dev_server.address, "workflow", "result", "--workflow-id", wid), timeout=20
    )
    assert code != 0
    assert "budget.max_steps" in out and "FAILED" in out
    code, out = await temporal_cli(dev_server.address, "workflow", "show", "--workflow-id", wid)
    assert "WorkflowTaskFailed" not in out, "bad input must fail the workflow, not its task"


async def test_sigkilled_worker_loses_nothing_and_repeats_no_completed_call(client, settings):
    steps = [{"tool_calls": [{"name": "probe_append", "arguments": {"label": f"s{i}", "sleep_s": 0.4}}]} for i in range(6)]
    first = await start_worker(settings)
    handle = await start(client, settings, scripted("probe", steps + [{"content": "all done"}], workspace="crash"))
    completed_before_kill = {r.key for r in (await wait_for(handle, lambda s: len(s.calls.tool_calls.items) >= 2)).calls.tool_calls.items}
    await first.stop(signal.SIGKILL)
    second = await start_worker(settings)
    try:
        result: AgentResult = await asyncio.wait_for(handle.result(), 60)
    finally:
        assert await second.stop() == 0, "a worker stopped with SIGTERM exits 0\n" + second.output
    assert result.phase == Phase.DONE and result.answer == "all done"
    done_lines = [
        line.split()[1]
        for line in (settings.workspace_root / "crash" / PROBE_LOG).read_text().splitlines()
        if line.startswith("done ")
    ]
    for key in completed_before_kill:
        assert done_lines.count(key) == 1, f"{key} ran again after the crash"
    assert len(set(done_lines)) == 6


async def test_a_long_tool_resumes_from_its_heartbeat_after_a_worker_kill(client, settings):
    script = [{"tool_calls": [{"name": "long_count", "arguments": {"items": 16, "per_item_s": 0.3}}]}, {"content": "counted"}]
    first = await start_worker(settings)
    handle = await start(client, settings, scripted("approver", script, workspace="hb"))
    log = settings.workspace_root / "hb" / PROBE_LOG
    await until(lambda: log.exists() and sum(line.startswith("item ") for line in log.read_text().splitlines()) >= 8,
                "8 items counted")
    await first.stop(signal.SIGKILL)
    second = await start_worker(settings)
    try:
        result: AgentResult = await asyncio.wait_for(handle.result(), 60)
    finally:
        await second.stop()
    assert result.phase == Phase.DONE
    lines = log.read_text().splitlines()
    starts = [line for line in lines if line.startswith("attempt ")]
    assert starts[0] == "attempt 1 starts at 0"
    resumed_at = int(starts[1].split()[-1])
    assert starts[1].startswith("attempt 2") and resumed_at >= 3, starts
    items = [line for line in lines if line.startswith("item ")]
    assert sorted(set(items), key=lambda s: int(s.split()[1])) == [f"item {i}" for i in range(16)]
    # heartbeats reach the server at most every 0.8 x heartbeat timeout (1.6 s = ~5 items here):
    # only the items after the last one the server received are done again
    assert len(items) - 16 <= 6
