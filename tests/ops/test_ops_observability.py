"""A worker process: metrics scraped during a run, JSON logs, exported traces; tracing in-process."""

from __future__ import annotations

import json
import re
import sys
import threading
import urllib.request
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from temporalio.client import Client

from devtools.devserver import free_port
from ratchet.client import RunFailed
from ratchet.contracts import Phase
from ratchet.ops.settings import SettingsError
from ratchet.ops.tracing import tracing_interceptors
from ratchet.payloads.converter import BASE_CONVERTER
from ratchet.worker.main import build_worker
from tests.ops_workers import start_worker
from tests.plugins.probe import BROKEN_MARKER
from tests.runs import scripted, start, wait_for_running_activity

# step 1 passes verification (cp-1); step 2 breaks it, reads a missing file and waits (we scrape
# then); step 3 fails the run, so the write of step 2 is compensated.
SCRIPT = [
    {"tool_calls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "a"}}]},
    {"tool_calls": [
        {"name": "write_file", "arguments": {"path": BROKEN_MARKER, "content": "x"}},
        {"name": "read_file", "arguments": {"path": "missing.txt"}},
        {"name": "probe_wait", "arguments": {"seconds": 1.5}},
    ]},
    {"tool_calls": [{"name": "probe_fatal", "arguments": {"note": "cannot go on"}}]},
]


def scrape(port: int) -> dict[str, float]:
    """`name{labels}` -> value, from the Prometheus text format."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            series, _, value = line.rpartition(" ")
            samples[series] = float(value)
    return samples


def total(samples: dict[str, float], name: str, **labels: str) -> float:
    """Sum of a metric's series whose labels include `labels`."""
    wanted = [f'{key}="{value}"' for key, value in labels.items()]
    pattern = re.compile(rf"^{re.escape(name)}(\{{|$)")
    return sum(v for series, v in samples.items() if pattern.match(series) and all(w in series for w in wanted))


class OtlpReceiver:
    """Collects the bodies of OTLP/HTTP trace exports (protobuf; span names are plain bytes)."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                receiver.bodies.append(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


async def test_worker_process_serves_metrics_during_a_run_logs_json_and_exports_traces(client, settings):
    port, otlp = free_port(), OtlpReceiver()
    worker = await start_worker(
        settings, RATCHET_METRICS_HOST="127.0.0.1", RATCHET_METRICS_PORT=str(port), RATCHET_LOG_FORMAT="json",
        RATCHET_OTEL="1", OTEL_EXPORTER_OTLP_ENDPOINT=otlp.url,
    )
    try:
        handle = await start(client, settings, scripted("priced", SCRIPT, workspace="w"))
        await wait_for_running_activity(handle, "tool.probe_wait")
        during = scrape(port)
        assert total(during, "temporal_activity_execution_latency_count") > 0
        assert total(during, "temporal_worker_task_slots_available", worker_type="ActivityWorker") > 0
        assert total(during, "ratchet_steps") == 2
        with pytest.raises(RunFailed):
            await handle.result()
        after = scrape(port)
    finally:
        assert await worker.stop() == 0, worker.output
        otlp.close()

    assert total(after, "ratchet_steps", model="scripted") == 3
    assert total(after, "ratchet_model_tokens", kind="prompt") > 0
    assert total(after, "ratchet_model_tokens", kind="completion") > 0
    assert total(after, "ratchet_model_cost_usd_sum") > 0
    # the billing ledger's series: every attempt billed, by agent, provider, model and cause
    billed = dict(agent="priced", provider="scripted", model="scripted", cause="answer", tenant="")
    assert total(after, "ratchet_tokens_total", kind="prompt", **billed) == total(after, "ratchet_model_tokens", kind="prompt")
    assert total(after, "ratchet_cost_usd_total", **billed) == pytest.approx(total(after, "ratchet_model_cost_usd_sum"))
    assert total(after, "ratchet_tool_calls", tool="write_file", outcome="ok") == 2
    assert total(after, "ratchet_tool_failures", tool="read_file", error_type="ToolError") == 1
    assert total(after, "ratchet_tool_failures", tool="probe_fatal", error_type="FatalToolError") == 1
    assert total(after, "ratchet_compensations", tool="write_file", outcome="undone") == 1
    assert total(after, "ratchet_verifications", passed="true") == 1
    assert total(after, "ratchet_verifications", passed="false") == 1

    records = [json.loads(line) for line in worker.lines if line.startswith("{")]
    ours = [r for r in records if r.get("workflow_id") == handle.workflow_id]
    first_write = [r for r in ours if r.get("activity_type") == "tool.write_file" and r.get("step") == 1]
    assert first_write and first_write[0]["call_id"] == "call_1_0", ours
    assert first_write[0]["key"] == f"{handle.workflow_id}/1/call_1_0" and first_write[0]["level"] == "INFO"
    assert {"ts", "logger", "message", "run_id", "attempt", "duration_s"} <= set(first_write[0])
    assert any(r.get("activity_type") == "model.call" and r.get("step") == 3 for r in ours)
    fatal = [r for r in ours if r.get("activity_type") == "tool.probe_fatal"]
    assert fatal and fatal[0]["outcome"] == "failed" and "cannot go on" in fatal[0]["message"]
    assert any("draining" in r["message"] for r in records)

    exported = b"".join(otlp.bodies)
    for span in (b"RunWorkflow:AgentWorkflow", b"RunActivity:model.call", b"RunActivity:tool.write_file"):
        assert span in exported, "spans flushed to the OTLP endpoint before the worker exited"


async def test_opentelemetry_spans_cover_the_client_the_workflow_and_each_activity(dev_server, settings):
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    traced = settings.model_copy(update={"otel": True})
    traced_client = await Client.connect(
        dev_server.address, data_converter=BASE_CONVERTER, interceptors=tracing_interceptors(traced, provider)
    )
    script = [{"tool_calls": [{"name": "probe_append", "arguments": {"label": "a"}}]}, {"content": "done"}]
    async with build_worker(traced_client, traced, graceful_shutdown_timeout=timedelta(0)):
        handle = await start(traced_client, traced, scripted("probe", script))
        assert (await handle.result()).phase == Phase.DONE
    spans = {span.name: span for span in exporter.get_finished_spans()}
    for name in (
        "StartWorkflow:AgentWorkflow", "RunWorkflow:AgentWorkflow",
        "StartActivity:model.call", "RunActivity:model.call", "RunActivity:tool.probe_append",
    ):
        assert name in spans, sorted(spans)
    trace_id = spans["StartWorkflow:AgentWorkflow"].context.trace_id
    assert spans["RunActivity:tool.probe_append"].context.trace_id == trace_id, "one trace for the run"


def test_tracing_without_opentelemetry_installed_says_how_to_install_it(settings, monkeypatch):
    assert tracing_interceptors(settings) == []
    monkeypatch.setitem(sys.modules, "temporalio.contrib.opentelemetry", None)
    with pytest.raises(SettingsError, match=r"RATCHET_OTEL: .*pip install 'ratchet-agents\[otel\]'"):
        tracing_interceptors(settings.model_copy(update={"otel": True}))
