"""OpenTelemetry tracing of clients, workflows and activities (RATCHET_OTEL=1, the `[otel]` extra).

temporalio's `TracingInterceptor` on the client: it creates spans for client calls
(`StartWorkflow:AgentWorkflow`), for workflow code (`RunWorkflow:AgentWorkflow`,
`StartActivity:model.call`, ...) and for activity executions (`RunActivity:tool.write_file`),
and carries the trace context through Temporal headers, so a run started by a traced client and
executed on several workers is one trace. Workflow spans are created even for runs started
without a traced client (the `temporal` CLI, schedules); after a worker restart replays a run,
its later spans may not find their parent.

The exporter is the OpenTelemetry SDK's OTLP/HTTP exporter, configured by the standard variables
(`OTEL_EXPORTER_OTLP_ENDPOINT`, default http://localhost:4318; `OTEL_SERVICE_NAME`, default
`ratchet`). An application that set its own global tracer provider keeps it.
"""

from __future__ import annotations

import logging
from typing import Any

from ratchet.ops.settings import Settings, SettingsError

log = logging.getLogger("ratchet.ops.tracing")
INSTALL_HINT = "pip install 'ratchet-agents[otel]'"
_owned_provider: Any = None


def tracing_interceptors(settings: Settings, tracer_provider: Any = None) -> list[Any]:
    """[TracingInterceptor] when RATCHET_OTEL is on, else []. Pass the interceptors to
    `Client.connect`; workers built on that client trace too."""
    if not settings.otel:
        return []
    try:
        from temporalio.contrib.opentelemetry import TracingInterceptor
    except ImportError:
        raise SettingsError(f"RATCHET_OTEL: OpenTelemetry is not installed; {INSTALL_HINT}") from None
    provider = tracer_provider or _global_provider()
    return [TracingInterceptor(provider.get_tracer("ratchet"), always_create_workflow_spans=True)]


def _global_provider() -> Any:
    global _owned_provider
    from opentelemetry import trace

    current = trace.get_tracer_provider()
    if not isinstance(current, trace.ProxyTracerProvider):
        return current  # configured by the application (or by an earlier call)
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as exc:
        raise SettingsError(f"RATCHET_OTEL: {exc.name} is not installed; {INSTALL_HINT}") from None
    provider = TracerProvider(resource=Resource.create({"service.name": "ratchet"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    _owned_provider = provider
    log.info("OpenTelemetry tracing on: OTLP/HTTP exporter")
    return provider


def flush_tracing(timeout_s: float = 5.0) -> None:
    """Export the spans still buffered (call before the process exits)."""
    if _owned_provider is not None:
        _owned_provider.force_flush(int(timeout_s * 1000))
