"""Telemetry once per real execution: on a worker without a workflow cache every workflow task
replays the run from its start, and no span or `ratchet_*` metric may be emitted again for what
was replayed (issue 23, point 7)."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest
from temporalio.client import Client

from devtools.devserver import free_port
from ratchet.contracts import Phase
from ratchet.ops.tracing import tracing_interceptors
from ratchet.payloads.converter import BASE_CONVERTER
from ratchet.worker.main import build_worker
from tests.ops.test_ops_observability import scrape, total
from tests.ops_workers import start_worker
from tests.runs import scripted, start

STEPS = 4
SCRIPT = [
    {"content": f"step {i}", "tool_calls": [{"name": "probe_append", "arguments": {"label": f"s{i}"}}]}
    for i in range(STEPS)
] + [{"content": "done"}]


async def activities_in_history(handle) -> Counter:
    history = await handle.history()
    return Counter(
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
    )


async def test_spans_are_emitted_once_per_execution_on_a_worker_without_a_cache(dev_server, settings):
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    traced = settings.model_copy(update={"otel": True, "max_cached_workflows": 0})
    traced_client = await Client.connect(
        dev_server.address, data_converter=BASE_CONVERTER, interceptors=tracing_interceptors(traced, provider)
    )
    async with build_worker(traced_client, traced, graceful_shutdown_timeout=timedelta(0)):
        handle = await start(traced_client, traced, scripted("probe", SCRIPT))
        assert (await handle.result()).phase == Phase.DONE
    spans = Counter(span.name for span in exporter.get_finished_spans())
    scheduled = await activities_in_history(handle)
    assert scheduled["model.call"] == STEPS + 1
    for activity, n in scheduled.items():
        assert spans[f"StartActivity:{activity}"] == n, (activity, spans)
        assert spans[f"RunActivity:{activity}"] == n, (activity, spans)
    assert spans["RunWorkflow:AgentWorkflow"] == 1, spans
    assert spans["StartWorkflow:AgentWorkflow"] == 1


async def test_metrics_count_each_execution_once_on_a_worker_without_a_cache(client, settings):
    port = free_port()
    worker = await start_worker(settings, RATCHET_METRICS_HOST="127.0.0.1", RATCHET_METRICS_PORT=str(port))
    try:
        handle = await start(client, settings, scripted("probe", SCRIPT))
        assert (await handle.result()).phase == Phase.DONE
        after = scrape(port)
    finally:
        assert await worker.stop() == 0, worker.output
    assert total(after, "ratchet_steps") == STEPS + 1
    assert total(after, "ratchet_tool_calls", tool="probe_append") == STEPS
