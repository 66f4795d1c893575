"""Prometheus metrics: the Temporal runtime's own, plus Ratchet's counters on the same endpoint.

With RATCHET_METRICS_PORT set, the worker's Temporal runtime serves `http://HOST:PORT/metrics`
(temporal_* series: task latencies, slots, polls, activity and workflow outcomes). Ratchet's own
series are recorded by an activity interceptor, so the workflow and activity code stay free of
metrics calls: it sees each activity's typed input and result.

| series | kind | labels (besides namespace, task_queue, activity_type) |
| --- | --- | --- |
| `ratchet_steps` | counter | `model`: model turns completed (one per agent step) |
| `ratchet_model_tokens` | counter | `model`, `kind` (prompt, completion) |
| `ratchet_model_cost_usd` | histogram (use `_sum`) | `model`: cost per call at the profile's prices |
| `ratchet_model_failures` | counter | `model`, `error_type`: failed attempts (each retry counts) |
| `ratchet_tool_calls` | counter | `tool`, `outcome` (ok, error, failed) |
| `ratchet_tool_failures` | counter | `tool`, `error_type`: errors returned to the model and failed attempts |
| `ratchet_compensations` | counter | `tool`, `outcome` (undone, failed) |
| `ratchet_verifications` | counter | `passed` (true, false) |
| `ratchet_tokens_total` | counter | `agent`, `provider`, `model`, `cause`, `tenant`, `kind`: billed tokens |
| `ratchet_cost_usd_total` | gauge (a running total) | `agent`, `provider`, `model`, `cause`, `tenant`: billed USD |

The billed series come from the billing ledger (activities/billing.py), one addition per attempt
billed. Temporal's meters have no float counter, so the cost is a gauge this process keeps adding
to: it starts again at 0 when the worker restarts, as a counter does (use `increase()` across restarts).

Counts are per activity *execution*: a retried attempt counts again, and a call whose result the
ledger already held (a retry after a worker crash) is counted once more, without a new cost.
"""

from __future__ import annotations

import asyncio
import contextvars
from typing import Any

from temporalio import activity
from temporalio.common import MetricMeter
from temporalio.exceptions import ApplicationError
from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, Interceptor

from ratchet.ops.settings import Settings, SettingsError
from ratchet.contracts import ErrorType

COST_BUCKETS_USD = [0.0001, 0.001, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0]


def metrics_runtime(settings: Settings) -> Runtime | None:
    """A Temporal runtime serving Prometheus metrics on RATCHET_METRICS_PORT, or None when unset."""
    if settings.metrics_port is None:
        return None
    address = f"{settings.metrics_host}:{settings.metrics_port}"
    config = PrometheusConfig(
        bind_address=address, histogram_bucket_overrides={"ratchet_model_cost_usd": COST_BUCKETS_USD}
    )
    try:
        return Runtime(telemetry=TelemetryConfig(metrics=config))
    except (ValueError, RuntimeError) as exc:
        raise SettingsError(f"RATCHET_METRICS_PORT: cannot serve metrics on {address}: {exc}") from None


class MetricsInterceptor(Interceptor):
    """Worker interceptor recording Ratchet's own metrics from activity inputs and results."""

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _MetricsActivityInbound(next)


_model_settings: contextvars.ContextVar[list[Any] | None] = contextvars.ContextVar(
    "ratchet_model_settings", default=None
)


def note_model_settings(settings: Any) -> None:
    """Called by model.call with the run's resolved `ModelSettings`: the metrics of this call are
    labelled and priced by them (the request carries only their digest)."""
    holder = _model_settings.get()
    if holder is not None:
        holder[0] = settings


class _MetricsActivityInbound(ActivityInboundInterceptor):
    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        kind, _, name = activity.info().activity_type.partition(".")
        holder: list[Any] = [None]
        token = _model_settings.set(holder)
        try:
            result = await self.next.execute_activity(input)
        except (Exception, asyncio.CancelledError) as exc:
            _failed(kind, name, holder[0], exc)
            raise
        finally:
            _model_settings.reset(token)
        _succeeded(kind, name, holder[0], result)
        return result


_cost_totals: dict[tuple[str, ...], float] = {}


def note_billed(row: Any, agent: str = "", tenant: str = "") -> None:
    """One billed attempt (a `BillingRow`): its tokens and cost, by agent, provider, model, cause, tenant."""
    labels = {"agent": agent, "provider": row.provider, "model": row.model, "cause": row.cause, "tenant": tenant}
    meter = _meter()
    tokens = meter.create_counter("ratchet_tokens_total", "Billed model tokens, every attempt", "tokens")
    for kind in ("prompt", "completion", "cache_read", "cache_write"):
        count = getattr(row, f"{kind}_tokens")
        if count:
            tokens.add(count, {**labels, "kind": kind})
    key = tuple(labels.values())
    _cost_totals[key] = _cost_totals.get(key, 0.0) + row.cost_usd
    meter.create_gauge_float("ratchet_cost_usd_total", "Billed model cost, every attempt", "USD").set(
        _cost_totals[key], labels
    )


def _meter() -> MetricMeter:
    return activity.metric_meter()


def _error_type(exc: BaseException) -> str:
    if isinstance(exc, ApplicationError) and exc.type:
        return exc.type
    return type(exc).__name__


def _failed(kind: str, name: str, settings: Any, exc: BaseException) -> None:
    meter, error_type = _meter(), _error_type(exc)
    if kind == "model":
        model = _model_name(settings)
        meter.create_counter("ratchet_model_failures", "Failed model call attempts").add(
            1, {"model": model, "error_type": error_type}
        )
    elif kind == "tool":
        meter.create_counter("ratchet_tool_calls", "Tool call attempts").add(1, {"tool": name, "outcome": "failed"})
        meter.create_counter("ratchet_tool_failures", "Tool errors and failed attempts").add(
            1, {"tool": name, "error_type": error_type}
        )
    elif kind == "undo":
        meter.create_counter("ratchet_compensations", "Undo (compensation) attempts").add(
            1, {"tool": name, "outcome": "failed"}
        )


def _succeeded(kind: str, name: str, settings: Any, result: Any) -> None:
    meter = _meter()
    if kind == "model":
        _model_call(meter, settings, result)
    elif kind == "tool":
        ok = bool(getattr(result, "ok", True))
        meter.create_counter("ratchet_tool_calls", "Tool call attempts").add(
            1, {"tool": name, "outcome": "ok" if ok else "error"}
        )
        if not ok:
            meter.create_counter("ratchet_tool_failures", "Tool errors and failed attempts").add(
                1, {"tool": name, "error_type": getattr(result, "error_type", None) or ErrorType.TOOL_ERROR}
            )
    elif kind == "undo":
        meter.create_counter("ratchet_compensations", "Undo (compensation) attempts").add(
            1, {"tool": name, "outcome": "undone"}
        )
    elif kind == "checkpoint" and name == "verify":
        passed = bool(getattr(getattr(result, "evidence", None), "passed", False))
        meter.create_counter("ratchet_verifications", "Verifier runs").add(1, {"passed": str(passed).lower()})


def _model_call(meter: MetricMeter, prices: Any, reply: Any) -> None:
    usage = getattr(reply, "usage", None)
    model = getattr(reply, "model", "") or _model_name(prices)
    meter.create_counter("ratchet_steps", "Model turns completed (agent steps)").add(1, {"model": model})
    if usage is None:
        return
    tokens = meter.create_counter("ratchet_model_tokens", "Model tokens", "tokens")
    tokens.add(usage.prompt_tokens, {"model": model, "kind": "prompt"})
    tokens.add(usage.completion_tokens, {"model": model, "kind": "completion"})
    if prices is not None:
        cost = (
            usage.prompt_tokens * prices.usd_per_1k_prompt_tokens
            + usage.completion_tokens * prices.usd_per_1k_completion_tokens
        ) / 1000
        meter.create_histogram_float("ratchet_model_cost_usd", "Cost per model call", "USD").record(
            cost, {"model": model}
        )


def _model_name(settings: Any) -> str:
    """The model the run's settings name (a reply names one only when the provider ran another)."""
    if getattr(settings, "provider", None) == "scripted":
        return "scripted"
    return str(getattr(settings, "model", "") or "unknown")
