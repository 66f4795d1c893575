"""History grows linearly: the bytes a step adds must not grow with the step number."""

from __future__ import annotations

from statistics import mean

from ratchet.contracts import Phase
from tests.runs import scripted, start
from worker.main import build_worker


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
    sizes = bytes_per_step(await handle.fetch_history())
    assert len(sizes) == 101
    early, late = mean(sizes[5:15]), mean(sizes[85:95])
    assert late / early < 1.1, f"bytes per step grew from {early:.0f} to {late:.0f}"


async def test_a_large_tool_output_stays_out_of_history(client, settings, worker):
    script = [{"tool_calls": [{"name": "read_file", "arguments": {"path": "big.txt"}}]}, {"content": "read it"}]
    (settings.workspace_root / "big").mkdir(parents=True)
    (settings.workspace_root / "big" / "big.txt").write_text("y" * 250_000)
    handle = await start(client, settings, scripted("probe", script, workspace="big"))
    assert (await handle.result()).phase == Phase.DONE
    history = await handle.fetch_history()
    completed = [e for e in history.events if e.HasField("activity_task_completed_event_attributes")]
    assert max(e.ByteSize() for e in completed) < 64 * 1024
    assert sum(e.ByteSize() for e in history.events) < 100 * 1024
