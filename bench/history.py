"""What a run's history says: events and bytes, step latencies, and where each step's time went.

Times come from the server's event timestamps, so they are the same clock for every variant:
- activity queue: ActivityTaskScheduled -> Started (matching, or 0 when dispatched eagerly)
- activity run: Started -> Completed (the activity's code plus the worker's round trip)
- workflow task queue / run: WorkflowTaskScheduled -> Started -> Completed (the worker's workflow
  code, including any local activities it ran, plus the round trip)
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from statistics import median

from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import WorkflowHistory

PHASES = ("activity_queue", "activity_run", "wft_queue", "wft_run")


@dataclass
class HistoryStats:
    events: int = 0
    bytes: int = 0
    largest_event: int = 0
    model_calls: int = 0
    activities: int = 0
    markers: int = 0
    wft_timeouts: int = 0
    start_to_first_model_s: float = 0.0
    """From the run's start to its first model call being scheduled (the prepare step)."""
    step_latencies_s: list[float] = field(default_factory=list)
    """Between consecutive model calls being scheduled: one agent step each."""
    step_bytes: list[int] = field(default_factory=list)
    """History bytes between consecutive model calls (the steady per-step cost)."""
    phase_s: dict[str, float] = field(default_factory=lambda: dict.fromkeys(PHASES, 0.0))
    input_bytes: int = 0
    """The start event's input payload as stored (a claim-checked input counts as its reference)."""
    input_logical_bytes: int = 0
    """The start event's input before the claim check (the blob's size when offloaded)."""

    def per_step(self, steps: int) -> dict[str, float]:
        return {
            "events_per_step": self.events / steps,
            "bytes_per_step": self.bytes / steps,
            "steady_bytes_per_step": median(self.step_bytes[1:-1]) if len(self.step_bytes) > 2 else 0.0,
            **{f"{k}_ms_per_step": v * 1000 / steps for k, v in self.phase_s.items()},
        }


def _t(event: HistoryEvent) -> float:
    return event.event_time.seconds + event.event_time.nanos / 1e9


def _input_sizes(event: HistoryEvent) -> tuple[int, int]:
    payloads = event.workflow_execution_started_event_attributes.input.payloads
    stored = sum(p.ByteSize() for p in payloads)
    logical = 0
    for p in payloads:
        if p.metadata.get("encoding") == b"binary/claim-check":
            logical += int(json.loads(p.data).get("size", 0))
        else:
            logical += p.ByteSize()
    return stored, logical


def analyze(history: WorkflowHistory, model_activity: str) -> HistoryStats:
    stats = HistoryStats()
    scheduled: dict[int, float] = {}
    started: dict[int, float] = {}
    wft_scheduled = wft_started = 0.0
    model_times: list[float] = []
    begin = _t(history.events[0]) if history.events else 0.0
    for event in history.events:
        size, t = event.ByteSize(), _t(event)
        stats.events += 1
        stats.bytes += size
        stats.largest_event = max(stats.largest_event, size)
        kind = event.WhichOneof("attributes")
        if kind == "workflow_execution_started_event_attributes":
            stats.input_bytes, stats.input_logical_bytes = _input_sizes(event)
        elif kind == "activity_task_scheduled_event_attributes":
            stats.activities += 1
            scheduled[event.event_id] = t
            if event.activity_task_scheduled_event_attributes.activity_type.name == model_activity:
                model_times.append(t)
                stats.step_bytes.append(0)
        elif kind == "activity_task_started_event_attributes":
            sched = event.activity_task_started_event_attributes.scheduled_event_id
            started[sched] = t
            stats.phase_s["activity_queue"] += t - scheduled.get(sched, t)
        elif kind == "activity_task_completed_event_attributes":
            sched = event.activity_task_completed_event_attributes.scheduled_event_id
            stats.phase_s["activity_run"] += t - started.get(sched, t)
        elif kind == "workflow_task_scheduled_event_attributes":
            wft_scheduled = t
        elif kind == "workflow_task_started_event_attributes":
            wft_started = t
            stats.phase_s["wft_queue"] += t - wft_scheduled
        elif kind == "workflow_task_completed_event_attributes":
            stats.phase_s["wft_run"] += t - wft_started
        elif kind == "workflow_task_timed_out_event_attributes":
            stats.wft_timeouts += 1
        elif kind == "marker_recorded_event_attributes":
            stats.markers += 1
        if stats.step_bytes:
            stats.step_bytes[-1] += size
    stats.model_calls = len(model_times)
    stats.start_to_first_model_s = model_times[0] - begin if model_times else 0.0
    stats.step_latencies_s = [b - a for a, b in zip(model_times, model_times[1:])]
    return stats


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100); 0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))
    return ordered[rank]


def payload_fields(history: WorkflowHistory, steps: int) -> dict[str, float]:
    """Bytes per step of each top-level JSON field of activity inputs and results, and of the
    activities' summaries: `model.call in: settings` -> 310.0. Shows what to trim."""
    kinds: dict[int, str] = {}
    sizes: dict[str, float] = {}

    def add(label: str, payloads) -> None:
        for p in payloads:
            try:
                value = json.loads(p.data)
            except ValueError:
                continue
            items = value.items() if isinstance(value, dict) else [("(value)", value)]
            for key, item in items:
                name = f"{label}: {key}"
                sizes[name] = sizes.get(name, 0.0) + len(key) + 3 + len(json.dumps(item, separators=(",", ":")))

    for event in history.events:
        kind = event.WhichOneof("attributes")
        if kind == "activity_task_scheduled_event_attributes":
            attrs = event.activity_task_scheduled_event_attributes
            name = attrs.activity_type.name.split(".")[0] if attrs.activity_type.name.startswith("tool.") else attrs.activity_type.name
            kinds[event.event_id] = name
            add(f"{name} in", attrs.input.payloads)
            if event.HasField("user_metadata"):
                label = f"{name} summary (user metadata)"
                sizes[label] = sizes.get(label, 0.0) + event.user_metadata.ByteSize()
        elif kind == "activity_task_completed_event_attributes":
            attrs = event.activity_task_completed_event_attributes
            add(f"{kinds.get(attrs.scheduled_event_id, '?')} out", attrs.result.payloads)
    return {k: v / steps for k, v in sorted(sizes.items(), key=lambda kv: -kv[1])}
