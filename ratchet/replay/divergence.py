"""Where a replay diverged, in the agent's terms: "step 7, model call", "step 9, tool write_file".

Temporal's nondeterminism errors name activity types but no event id ("Activity type of
scheduled event 'model.call' does not match activity type of activity command 'x'"), so the
place is found from the history itself: replay ever longer prefixes, each cut where a workflow
task starts, and find the first workflow task whose commands today's code no longer produces
(bisection, a few replays). That task's `ActivityTaskScheduled` events name the activity type
(`model.call`, `tool.<name>`) and carry the input, whose `step` field (ModelRequest,
ToolInvocation) is the agent step; `user_metadata.summary` ("step 4: tool write_file a.py") is
the fallback. `run.prepare` (before step 1) was a local activity (`MarkerRecorded`) in older histories.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from ratchet.contracts.activities import MODEL_CALL, PREPARE, WORKSPACE_OPEN
from ratchet.payloads.converter import BASE_CONVERTER

Probe = Callable[[Sequence[HistoryEvent]], Awaitable[bool]]
"""Replays a history prefix; True if the replay fails."""
Decode = Callable[[Payload], Awaitable[Any]]
"""A payload to its JSON value (through the payload codec, if any); None if it cannot."""

_QUOTED_TYPE = re.compile(r"scheduled event '([^']+)'")
_LOCAL_ACTIVITY_MARKER = "core_local_activity"
_PATCH_MARKER, _PATCH_DATA = "core_patch", "patch-data"


@dataclass(frozen=True)
class Activity:
    event_id: int
    activity_type: str
    label: str


async def locate(events: Sequence[HistoryEvent], message: str, fails: Probe, decode: Decode | None = None) -> str:
    """The first agent step and activity today's code no longer replays.

    A prefix cut where workflow task k starts checks tasks before k (the open task k's own
    outcome is not judged), so the culprit is the task before the shortest failing prefix."""
    starts = [e.event_id for e in events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED]
    lo, hi = 0, len(starts)  # prefix len(starts) is the whole history, known to fail
    while lo < hi:
        mid = (lo + hi) // 2
        if await fails([e for e in events if e.event_id <= starts[mid]]):
            hi = mid
        else:
            lo = mid + 1
    quoted = _QUOTED_TYPE.search(message)
    decode = decode or plain_json
    activities = await agent_activities(events, decode)
    return await _describe_task(events, activities, starts, lo - 1, quoted.group(1) if quoted else None, decode)


async def _describe_task(
    events: Sequence[HistoryEvent],
    activities: list[Activity],
    starts: list[int],
    task: int,
    wanted: str | None,
    decode: Decode,
) -> str:
    first = starts[task] if 0 <= task < len(starts) else 0
    end = starts[task + 1] if 0 <= task + 1 < len(starts) else float("inf")
    inside = [a for a in activities if first < a.event_id < end]
    chosen = [a for a in inside if a.activity_type == wanted] or inside
    if chosen:
        return chosen[0].label
    before = [a for a in activities if a.event_id < end]
    where = await _first_command(events, first, decode)
    return f"after {before[-1].label}, at {where}" if before else f"at {where}"


async def agent_activities(events: Sequence[HistoryEvent], decode: Decode) -> list[Activity]:
    """Every scheduled activity and recorded local activity of the history, labelled. A local
    activity takes the step of the activity before it ("before step 1" at the start)."""
    found: list[Activity] = []
    step = 0
    for event in events:
        if event.HasField("activity_task_scheduled_event_attributes"):
            activity, step = await _scheduled(event, decode, step)
            found.append(activity)
        elif event.HasField("marker_recorded_event_attributes"):
            activity_type = await _local_activity_type(event, decode)
            if activity_type:
                label = describe_activity(activity_type, step) if step else f"before step 1, {activity_type}"
                found.append(Activity(event.event_id, activity_type, label))
    return found


def describe_activity(activity_type: str, step: int | None) -> str:
    """`model.call` at step 7 -> "step 7, model call"; `tool.write_file` -> "step 9, tool write_file"."""
    if activity_type == MODEL_CALL.name:
        what = "model call"
    elif activity_type.startswith("tool."):
        what = f"tool {activity_type.removeprefix('tool.')}"
    else:
        what = f"activity {activity_type}"
    return f"step {step}, {what}" if step is not None else what


async def _scheduled(event: HistoryEvent, decode: Decode, last_step: int) -> tuple[Activity, int]:
    """The activity, and the agent step it belongs to (`last_step` if its input has none)."""
    attrs = event.activity_task_scheduled_event_attributes
    activity_type = attrs.activity_type.name
    value = await decode(attrs.input.payloads[0]) if attrs.input.payloads else None
    step = value.get("step") if isinstance(value, dict) else None
    if isinstance(step, int):
        return Activity(event.event_id, activity_type, describe_activity(activity_type, step)), step
    label = describe_activity(activity_type, None)
    if activity_type in (PREPARE.name, WORKSPACE_OPEN.name):
        label = f"before step 1, {activity_type}"
    elif event.user_metadata.HasField("summary"):
        summary = await decode(event.user_metadata.summary)
        label = summary.replace(":", ",", 1) if isinstance(summary, str) and summary else label
    return Activity(event.event_id, activity_type, label), last_step


async def _local_activity_type(event: HistoryEvent, decode: Decode) -> str | None:
    attrs = event.marker_recorded_event_attributes
    if attrs.marker_name != _LOCAL_ACTIVITY_MARKER or "data" not in attrs.details:
        return None
    if not attrs.details["data"].payloads:
        return "local activity"
    data = await decode(attrs.details["data"].payloads[0])
    return str(data.get("activity_type") or "local activity") if isinstance(data, dict) else "local activity"


async def plain_json(payload: Payload) -> Any:
    """The default `Decode`: pydantic JSON, no codec."""
    try:
        return BASE_CONVERTER.payload_converter.from_payload(payload)
    except Exception:  # an undecodable payload only costs us the label
        return None


async def _first_command(events: Sequence[HistoryEvent], task_started: int, decode: Decode) -> str:
    """The event right after the task's WorkflowTaskCompleted: its first command, e.g. the run's end."""
    completed = next(
        (
            e.event_id
            for e in events
            if e.event_id > task_started and e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
        ),
        None,
    )
    after = next((e for e in events if completed is not None and e.event_id == completed + 1), None)
    if after is None:
        return "the end of the history"
    patch = await _patch_id(after, decode)
    what = f"patch {patch!r}" if patch else EventType.Name(after.event_type).removeprefix("EVENT_TYPE_").lower()
    return f"{what} (event {after.event_id})"


async def _patch_id(event: HistoryEvent, decode: Decode) -> str | None:
    """The id of a `workflow.patched()` marker."""
    attrs = event.marker_recorded_event_attributes
    if attrs.marker_name != _PATCH_MARKER or _PATCH_DATA not in attrs.details:
        return None
    payloads = attrs.details[_PATCH_DATA].payloads
    data = await decode(payloads[0]) if payloads else None
    return str(data.get("id")) if isinstance(data, dict) else None
