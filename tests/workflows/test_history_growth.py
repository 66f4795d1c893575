"""History grows linearly: the bytes a step adds must not grow with the step number."""

from __future__ import annotations

import json
from statistics import mean

import pytest

from ratchet.contracts import Phase
from ratchet.worker.main import build_worker
from tests.runs import scripted, start

pytestmark = pytest.mark.e2e  # slow: `make test-e2e`, not `make test`

def bytes_per_step(history) -> list[int]:
    """History bytes between consecutive model calls (one agent step each)."""
    steps: list[int] = []
    for event in history.events:
        attrs = event.activity_task_scheduled_event_attributes
        if event.HasField("activity_task_scheduled_event_attributes") and attrs.activity_type.name == "model.call":
            steps.append(0)
        if steps:
            steps[-1] += event.ByteSize()
    return steps


async def test_bytes_per_step_stay_flat_over_100_steps(client, settings):
    step = {"tool_calls": [{"name": "probe_append", "arguments": {"label": "x" * 200}}]}
    run = scripted("probe", [step] * 100 + [{"content": "done"}], workspace="long", budget={"max_steps": 101, "max_tokens": 10**9})
    async with build_worker(client, settings, max_cached_workflows=10):
        handle = await start(client, settings, run)
        assert (await handle.result()).phase == Phase.DONE
    sizes = bytes_per_step(await handle.history())
    assert len(sizes) == 101
    early, late = mean(sizes[5:15]), mean(sizes[85:95])
    assert late / early < 1.1, f"bytes per step grew from {early:.0f} to {late:.0f}"


async def test_a_model_call_sends_the_runs_config_once_and_replies_only_what_the_message_does_not_say(client, settings, worker):
    """Settings and tool schemas travel as one digest (call_ref), never inline. A reply names no
    finish reason or model its message and settings already say."""
    script = [{"tool_calls": [{"name": "probe_append", "arguments": {"label": str(i)}}]} for i in range(3)] + [{"content": "done"}]
    handle = await start(client, settings, scripted("probe", script, workspace="w"))
    assert (await handle.result()).phase == Phase.DONE
    requests, replies, scheduled = [], [], set()
    for event in (await handle.history()).events:
        if event.HasField("activity_task_scheduled_event_attributes"):
            attrs = event.activity_task_scheduled_event_attributes
            if attrs.activity_type.name == "model.call":
                scheduled.add(event.event_id)
                requests.append(json.loads(attrs.input.payloads[0].data))
        if event.HasField("activity_task_completed_event_attributes"):
            if event.activity_task_completed_event_attributes.scheduled_event_id in scheduled:
                replies.append(json.loads(event.activity_task_completed_event_attributes.result.payloads[0].data))
    assert len(requests) == 4 and all(len(r["call_ref"]) == 64 and "settings" not in r for r in requests)
    assert "transcript" not in requests[0] and all(r["transcript"] for r in requests[1:])
    assert all("finish_reason" not in r and "model" not in r for r in replies)
    assert [r["transcript"] for r in replies[:-1]] == [r["transcript"] for r in requests[1:]]


async def test_a_large_tool_output_stays_out_of_history(client, settings, worker):
    script = [{"tool_calls": [{"name": "read_file", "arguments": {"path": "big.txt"}}]}, {"content": "read it"}]
    (settings.workspace_root / "big").mkdir(parents=True)
    (settings.workspace_root / "big" / "big.txt").write_text("y" * 250_000)
    handle = await start(client, settings, scripted("probe", script, workspace="big"))
    assert (await handle.result()).phase == Phase.DONE
    history = await handle.history()
    completed = [e for e in history.events if e.HasField("activity_task_completed_event_attributes")]
    assert max(e.ByteSize() for e in completed) < 64 * 1024
    assert sum(e.ByteSize() for e in history.events) < 100 * 1024


async def test_the_result_of_a_top_level_run_names_its_effects_by_count_not_in_full(client, settings, worker):
    """40 compensable writes of 1 KB: the completion event stays small; the effects are in `state`."""
    script = [{"tool_calls": [{"name": "write_file", "arguments": {"path": f"f{i}.txt", "content": "x" * 1000}}]}
              for i in range(40)] + [{"content": "done"}]
    handle = await start(client, settings, scripted("probe", script, workspace="many", budget={"max_steps": 50}))
    result = await handle.result()
    assert result.phase == Phase.DONE and result.effects_left == 40 and result.effects == []
    history = await handle.history()
    completed = next(e for e in history.events if e.HasField("workflow_execution_completed_event_attributes"))
    assert completed.ByteSize() < 2048, completed.ByteSize()
    state = await handle.state()
    assert len(state.effects.stack.items) == 40


async def test_a_scripted_runs_script_is_in_history_once(client, settings, worker):
    """run.prepare reads the run from the start event: the script is not sent again as its input."""
    marker = "unmistakable-" + "s" * 2000
    script = [{"tool_calls": [{"name": "probe_echo", "arguments": {"text": marker}}]}, {"content": "done"}]
    handle = await start(client, settings, scripted("probe", script, workspace="once"))
    assert (await handle.result()).phase == Phase.DONE
    history = await handle.history()
    prepare = next(e for e in history.events if e.HasField("activity_task_scheduled_event_attributes")
                   and e.activity_task_scheduled_event_attributes.activity_type.name == "run.prepare")
    assert marker.encode() in history.events[0].SerializeToString()
    assert marker.encode() not in prepare.SerializeToString() and prepare.ByteSize() < 600, prepare.ByteSize()
