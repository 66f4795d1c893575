"""Exactly once for the reader: a worker SIGKILLed in the middle of a streamed reply; the retry's
text supersedes the first attempt's and a reader through `LiveText` shows the reply once. And
`ratchet watch` on a live and on a closed run."""

from __future__ import annotations

import asyncio
import signal
import uuid

import pytest

from ratchet.client import LiveText, RatchetClient
from ratchet.contracts import Phase
from ratchet.contracts.events import AttemptStarted, RunEnded, TextDelta
from tests.ops_workers import start_worker
from tests.runs import ratchet, scripted

pytestmark = pytest.mark.e2e  # slow: `make test-e2e`, not `make test`

REPLY = "".join(f"sentence {i} of a long reply that the model writes slowly. " for i in range(12))  # ~650 chars


async def test_a_worker_killed_mid_stream_the_reader_sees_the_reply_once(client, settings):
    rc = RatchetClient(client, settings)
    first = await start_worker(settings, RATCHET_SCRIPTED_CHARS_PER_S="200")  # ~3 s for the reply
    run = await rc.start(scripted("probe", [{"content": REPLY}]), f"kill-{uuid.uuid4().hex[:8]}")
    seen: list = []
    second = None
    try:
        async with asyncio.timeout(120):
            async for event in run.stream():
                seen.append(event)
                text = sum(len(e.text) for e in seen if isinstance(e, TextDelta) and e.attempt == 1)
                if first is not None and text >= 100:
                    await first.stop(signal.SIGKILL)  # mid-reply: the rest never comes from this attempt
                    first = None
                    second = await start_worker(settings, RATCHET_SCRIPTED_CHARS_PER_S="2000")
        result = await run.result()
        # `ratchet watch` on the closed run (a query: it needs a worker): the reply once, exit 0
        code, out = await ratchet(settings, "watch", run.workflow_id)
    finally:
        for worker in (first, second):
            if worker is not None:
                await worker.stop()
    assert result.phase == Phase.DONE and result.answer == REPLY
    first_text = "".join(e.text for e in seen if isinstance(e, TextDelta) and e.attempt == 1)
    assert 100 <= len(first_text) < len(REPLY) and REPLY.startswith(first_text), "attempt 1 was cut mid-reply"
    starts = [e for e in seen if isinstance(e, AttemptStarted)]
    assert [(e.attempt, e.supersedes) for e in starts] == [(1, 0), (2, 1)]
    retry = seen.index(starts[1])
    assert all(e.attempt == 2 for e in seen[retry:] if isinstance(e, TextDelta)), "nothing of attempt 1 after the retry"
    assert "".join(e.text for e in seen[retry:] if isinstance(e, TextDelta)) == REPLY
    assert isinstance(seen[-1], RunEnded) and seen[-1].answer == REPLY
    # the reader, event by event: every piece shown is new, and all of it is the reply, once
    live = LiveText()
    shown = [live.feed(e) for e in seen]
    assert "".join(shown) == REPLY
    assert [piece for piece in shown[retry:] if piece] and REPLY.endswith("".join(shown[retry:]))
    assert code == 0 and out.count("sentence 0 of") == 1 and out.count("sentence 11 of") == 1, out
    assert "[DONE] ended at step 1" in out and "answer:" not in out, out  # shown as it was written


async def test_ratchet_watch_exits_with_the_runs_status(client, settings, worker):
    rc = RatchetClient(client, settings)
    script = [
        {
            "content": "I will write it.",
            "tool_calls": [{"name": "write_file", "arguments": {"path": "../x", "content": "1"}}],
        },
        {"content": "could not"},
    ]
    run = await rc.start(scripted("probe", script, budget={"max_steps": 1}))
    code, out = await ratchet(settings, "watch", run.workflow_id)  # follows it live to its end
    assert code == 1 and "I will write it." in out and "-> write_file" in out, out
    assert "[BUDGET_EXHAUSTED] ended at step" in out, out
    done = await rc.start(scripted("probe", [{"content": "fine"}]))
    await done.result()
    code, out = await ratchet(settings, "watch", done.workflow_id, "--topics", "answer")
    assert code == 0 and "[DONE] ended at step 1" in out and "answer: fine" in out, out  # no text shown: the answer


async def test_streaming_is_on_by_default_and_off_per_run_or_profile(client, settings):
    """Off, the model call publishes nothing (no signal in history, no text on the stream) and the
    stream still ends with the answer; a run's `model.stream` overrides its profile's."""
    rc = RatchetClient(client, settings)
    worker = await start_worker(settings, RATCHET_SCRIPTED_CHARS_PER_S="400")  # ~0.8 s: several batches
    cases = [("default", "probe", None), ("run off", "probe", False), ("profile off", "quiet", None)]
    cases.append(("run on over profile off", "quiet", True))
    try:
        for name, agent, stream in cases:
            spec = scripted(agent, [{"content": REPLY[:320]}])
            if stream is not None:
                spec["model"]["stream"] = stream
            run = await rc.start(spec)
            assert (await run.result()).answer == REPLY[:320]
            publishes = [
                e
                for e in (await run.history()).events
                if e.workflow_execution_signaled_event_attributes.signal_name == "__temporal_workflow_stream_publish"
            ]
            streams = name in ("default", "run on over profile off")
            assert bool(publishes) == streams, f"{name}: {len(publishes)} batches"
            # a closed run's stream is read by a query: a worker answers it
            events = [e async for e in run.stream(topics=["tokens", "answer"])]
            text = "".join(e.text for e in events if isinstance(e, TextDelta))
            assert text == (REPLY[:320] if streams else ""), name
            assert isinstance(events[-1], RunEnded) and events[-1].answer == REPLY[:320], name
    finally:
        await worker.stop()
