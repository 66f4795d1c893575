"""History grows linearly: the bytes a step adds must not grow with the step number."""

from __future__ import annotations

import json
from statistics import mean

from temporalio import activity

from ratchet.stores import transcripts
from ratchet.stores.artifacts import put_json
from ratchet.contracts import ModelReply, ModelRequest, Phase
from tests.runs import scripted, start
from ratchet.worker.main import Activities, build_worker


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


async def test_a_model_call_sends_the_runs_config_once_and_replies_only_what_the_message_does_not_say(client, settings, worker):
    """Settings and tool schemas (call_ref) travel once: later requests build on a transcript whose
    header names them. A reply names no finish reason or model its message and settings already say."""
    script = [{"tool_calls": [{"name": "probe_append", "arguments": {"label": str(i)}}]} for i in range(3)] + [{"content": "done"}]
    handle = await start(client, settings, scripted("probe", script, workspace="w"))
    assert (await handle.result()).phase == Phase.DONE
    requests, replies, scheduled = [], [], set()
    async for event in handle.fetch_history_events():
        if event.HasField("activity_task_scheduled_event_attributes"):
            attrs = event.activity_task_scheduled_event_attributes
            if attrs.activity_type.name == "model.call":
                scheduled.add(event.event_id)
                requests.append(json.loads(attrs.input.payloads[0].data))
        if event.HasField("activity_task_completed_event_attributes"):
            if event.activity_task_completed_event_attributes.scheduled_event_id in scheduled:
                replies.append(json.loads(event.activity_task_completed_event_attributes.result.payloads[0].data))
    assert len(requests) == 4 and "first" in requests[0] and "call_ref" not in requests[0]
    assert all("call_ref" not in r and "settings" not in r and r["transcript"] for r in requests[1:])
    assert all("finish_reason" not in r and "model" not in r for r in replies)
    assert [r["transcript"] for r in replies[:-1]] == [r["transcript"] for r in requests[1:]]


class StepOneFromAnOldWorker(Activities):
    """Step 1's model call answered as a worker from before transcript segments answered it: the
    whole conversation as one JSON list, and a reply that does not say its transcript names call_ref."""

    def all(self) -> list:
        model = self.model

        @activity.defn(name="model.call")
        async def call(req: ModelRequest) -> ModelReply:
            reply = await model.call(req)
            if req.step == 1:
                messages = transcripts.read_all(model.artifacts, reply.transcript)
                reply.transcript = put_json(model.artifacts, [m.model_dump(exclude_defaults=True) for m in messages]).digest
                reply.headed = False
            return reply

        return [call, *(a for a in super().all() if a != model.call)]


async def test_a_run_whose_last_reply_came_from_an_older_worker_sends_call_ref_again(client, settings):
    """Upgrading workers mid-run: the new code must not leave call_ref out of a request that builds
    on a transcript the old code wrote (it names none); the next one can again."""
    script = [{"tool_calls": [{"name": "probe_append", "arguments": {"label": str(i)}}]} for i in range(2)] + [{"content": "ok"}]
    async with build_worker(client, settings, StepOneFromAnOldWorker(settings, client)):
        handle = await start(client, settings, scripted("probe", script, workspace="w"))
        assert (await handle.result()).answer == "ok"
    requests = [
        json.loads(e.activity_task_scheduled_event_attributes.input.payloads[0].data)
        async for e in handle.fetch_history_events()
        if e.HasField("activity_task_scheduled_event_attributes")
        and e.activity_task_scheduled_event_attributes.activity_type.name == "model.call"
    ]
    assert ["call_ref" in r for r in requests] == [False, True, False]


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
