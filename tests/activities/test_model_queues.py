"""Provider limits shared by all workers: a provider's model calls on a task queue of their own,
limited by Temporal itself (max_task_queue_activities_per_second), on the real dev server."""

from __future__ import annotations

from datetime import timedelta

import pytest

from ratchet.contracts import Phase
from ratchet.ops.settings import ModelQueue, SettingsError, load_settings
from ratchet.worker.main import build_worker
from tests.runs import scripted, start

STEPS = 4


async def test_a_providers_calls_run_on_its_own_rate_limited_queue(client, settings):
    limited = settings.model_copy(update={"model_queues": {"scripted": ModelQueue(per_second=1, concurrency=2)}})
    script = [{"tool_calls": [{"name": "probe_append", "arguments": {"label": str(i)}}]} for i in range(STEPS - 1)]
    async with build_worker(client, limited, graceful_shutdown_timeout=timedelta(0)):
        handle = await start(client, limited, scripted("probe", [*script, {"content": "done"}]))
        assert (await handle.result()).phase == Phase.DONE
    history = await handle.history()
    scheduled = {
        e.event_id: e.activity_task_scheduled_event_attributes
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
    }
    queues = {a.task_queue.name for a in scheduled.values() if a.activity_type.name == "model.call"}
    assert queues == {f"{settings.task_queue}/model/scripted"}
    started = [
        e.event_time.ToDatetime()
        for e in history.events
        if e.HasField("activity_task_started_event_attributes")
        and scheduled[e.activity_task_started_event_attributes.scheduled_event_id].activity_type.name == "model.call"
    ]
    assert len(started) == STEPS
    # one a second: Temporal held the later calls back (a lower bound; a loaded machine only adds to
    # it). The limiter lets a burst of two through; its clock and the events' times differ by
    # milliseconds (CI measured 1.9997 s for the 2 s bound)
    assert (started[-1] - started[0]).total_seconds() >= STEPS - 2 - 0.05


def test_model_queues_come_from_one_variable_and_a_bad_one_is_named(monkeypatch):
    monkeypatch.setenv("RATCHET_MODEL_QUEUES", '{"openai": {"per_second": 5, "concurrency": 8}}')
    assert load_settings().model_queues == {"openai": ModelQueue(per_second=5, concurrency=8)}
    monkeypatch.setenv("RATCHET_MODEL_QUEUES", '{"openai": {"per_second": 0}}')
    with pytest.raises(SettingsError, match="RATCHET_MODEL_QUEUES: Input should be greater than 0"):
        load_settings()
