"""A run's stream through `ratchet.client`, on the dev server with a real worker: the step events
and the tokens as they happen, resumed from an offset, across continue-as-new, drained from a
closed run, approvals that hold while streaming; a reader's mistakes are errors, never a wait."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import pytest
from temporalio.contrib.workflow_streams import PollResult

import ratchet.client.stream as client_stream
from ratchet.client import InvalidInput, LiveText, RatchetClient, RunNotFound
from ratchet.contracts import Phase
from ratchet.contracts.events import (
    ApprovalDecided,
    ApprovalRequested,
    AttemptStarted,
    CheckpointTaken,
    PhaseChanged,
    RunEnded,
    TextDelta,
    ToolCallDelta,
    ToolCallFinished,
    ToolCallStarted,
)
from tests.runs import scripted

ANSWER = "All done: wrote a.txt and read it back, and it says hello. " * 3


def ratchet_client(client, settings) -> RatchetClient:
    return RatchetClient(client, settings)


async def read_all(run, **kw) -> list:
    return [event async for event in run.stream(**kw)]


async def test_a_run_streams_its_steps_tokens_and_answer_and_a_closed_run_drains_them(client, settings, worker):
    rc = ratchet_client(client, settings)
    script = [
        {
            "content": "Writing the file.",
            "tool_calls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "hello"}}],
        },
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}}]},
        {"content": ANSWER},
    ]
    run = await rc.start(scripted("probe", script, workspace=f"s-{uuid.uuid4().hex[:6]}"))
    live = await asyncio.wait_for(read_all(run), 60)  # ends by itself when the run closes
    assert (await run.result()).phase == Phase.DONE
    offsets = [e.offset for e in live]
    assert offsets == sorted(set(offsets)) and offsets[0] == 0
    assert isinstance(live[-1], RunEnded) and live[-1].phase == Phase.DONE and live[-1].answer == ANSWER
    kinds = [type(e) for e in live]
    assert kinds.count(AttemptStarted) == 3 and all(e.attempt == 1 for e in live if isinstance(e, AttemptStarted))
    assert "".join(e.text for e in live if isinstance(e, TextDelta) and e.step == 3) == ANSWER
    assert "".join(e.text for e in live if isinstance(e, TextDelta) and e.step == 1) == "Writing the file."
    arguments = "".join(e.arguments for e in live if isinstance(e, ToolCallDelta) and e.step == 1)
    assert arguments == '{"path": "a.txt", "content": "hello"}'
    started = [e for e in live if isinstance(e, ToolCallStarted)]
    finished = [e for e in live if isinstance(e, ToolCallFinished)]
    assert [e.tool for e in started] == [e.tool for e in finished] == ["write_file", "read_file"]
    assert finished[1].ok and "hello" in finished[1].summary
    assert live.index(started[0]) < live.index(finished[0]) < live.index(started[1])
    assert {e.phase for e in live if isinstance(e, PhaseChanged)} >= {Phase.THINKING, Phase.ACTING}
    # every event says where it belongs
    assert all(e.step >= 0 and e.attempt >= 1 for e in live)
    assert {e.call for e in live if isinstance(e, (TextDelta, AttemptStarted))} == {"model"}
    assert {e.call for e in started} == {e.call for e in finished} and all(e.call for e in started)

    # the closed run: everything retained, in the same order; resumed mid-way: the rest
    assert [e.model_dump() for e in await asyncio.wait_for(read_all(run), 30)] == [e.model_dump() for e in live]
    middle = live[len(live) // 2].offset
    assert [e.offset for e in await read_all(run, from_offset=middle)] == [o for o in offsets if o >= middle]
    answers = await read_all(run, topics=["answer"])
    assert [type(e) for e in answers] == [RunEnded]
    tokens = await asyncio.wait_for(read_all(run, topics=["tokens"]), 30)  # ends at the run's end, unseen
    assert tokens and [e.offset for e in tokens] == [e.offset for e in live if e.topic == "tokens"]
    text = LiveText()
    assert "".join(text.feed(e) for e in live if e.step == 3) == ANSWER


async def test_a_readers_mistakes_are_errors_not_waits(client, settings, worker):
    rc = ratchet_client(client, settings)
    with pytest.raises(RunNotFound):
        await asyncio.wait_for(read_all(rc.get(f"no-such-run-{uuid.uuid4().hex[:6]}")), 10)
    run = await rc.start(scripted("probe", [{"content": "done"}]))
    await run.result()
    with pytest.raises(InvalidInput, match="unknown topic 'token'"):
        await read_all(run, topics=["token"])
    with pytest.raises(InvalidInput, match="beyond the end of the stream"):
        await asyncio.wait_for(read_all(run, from_offset=10_000), 10)
    with pytest.raises(InvalidInput, match="from_offset"):
        await read_all(run, from_offset=-1)


async def test_a_reader_between_polls_when_the_run_ends_takes_the_end_from_the_run(
    client, settings, worker, monkeypatch
):
    """A run that a reader follows waits for its next poll before it closes (workflows/events.py
    `RunStream.close`): a reader in its cooldown then gets the end from a poll, not by a query of
    the closed run, which replays the run's whole history on a worker."""
    monkeypatch.setattr(client_stream, "POLL_COOLDOWN", timedelta(milliseconds=500))  # the steps are faster
    rc = ratchet_client(client, settings)
    run = await rc.start(
        scripted("probe", [{"tool_calls": [{"name": "list_files", "arguments": {}}]}, {"content": "done"}])
    )
    live = await asyncio.wait_for(read_all(run), 60)
    assert isinstance(live[-1], RunEnded) and live[-1].answer == "done"
    polls = [
        e.workflow_execution_update_completed_event_attributes.outcome.success
        for e in (await run.history()).events
        if e.HasField("workflow_execution_update_completed_event_attributes")
    ]
    [last] = await client.data_converter.decode(polls[-1].payloads, [PollResult])
    assert live[-1].offset in [item.offset for item in last.items], "the last poll returned the end"


async def test_the_stream_follows_continue_as_new_and_carries_checkpoints(client, settings, worker):
    rc = ratchet_client(client, settings)
    steps = [
        {"tool_calls": [{"name": "write_file", "arguments": {"path": f"f{i}.txt", "content": str(i)}}]}
        for i in range(12)
    ]
    run = await rc.start(scripted("archivist", steps + [{"content": "wrote them all"}]))
    live = await asyncio.wait_for(read_all(run, topics=["steps", "answer"]), 120)
    state = await run.state()
    assert state.continued >= 1, "the run continued as new"
    checkpoints = [e for e in live if isinstance(e, CheckpointTaken)]
    assert len(checkpoints) == 12 and all(e.evidence == "true -> exit 0" for e in checkpoints)
    finished = [e for e in live if isinstance(e, ToolCallFinished)]
    assert len(finished) == 12 == len({e.call + str(e.step) for e in finished}), "each call once, across runs"
    assert isinstance(live[-1], RunEnded) and live[-1].answer == "wrote them all"
    offsets = [e.offset for e in live]
    assert offsets == sorted(set(offsets))


async def test_a_call_that_needs_approval_is_announced_and_waits(client, settings, worker):
    rc = ratchet_client(client, settings)
    script = [
        {"tool_calls": [{"name": "create_ticket", "arguments": {"title": "prod outage", "body": "x"}}]},
        {"content": "ticket filed"},
    ]
    run = await rc.start(scripted("approver", script))
    seen: list = []
    async for event in run.stream(topics=["steps", "answer"]):
        seen.append(event)
        if isinstance(event, ApprovalRequested):
            break
    assert not any(isinstance(e, ToolCallStarted) for e in seen), "it did not run before its approval"
    requested = seen[-1]
    assert requested.tool == "create_ticket" and "prod outage" in requested.arguments
    await asyncio.sleep(0.5)
    assert (await run.state()).phase == Phase.AWAITING_APPROVAL
    await run.approve(requested.call)
    rest = await asyncio.wait_for(read_all(run, from_offset=requested.offset + 1, topics=["steps", "answer"]), 60)
    kinds = [type(e) for e in rest]
    assert kinds.index(ApprovalDecided) < kinds.index(ToolCallStarted) < kinds.index(ToolCallFinished)
    decided = rest[kinds.index(ApprovalDecided)]
    assert decided.approved and decided.call == requested.call
    assert isinstance(rest[-1], RunEnded) and rest[-1].phase == Phase.DONE


async def test_the_stream_never_carries_a_secret_the_redaction_layer_hides(client, settings, worker, openai_key):
    secret = openai_key  # the worker's OPENAI_API_KEY: its redactor knows it
    reply = f"The key is {secret}, and reversed {secret[::-1]}; that is all."
    run = await ratchet_client(client, settings).start(scripted("probe", [{"content": reply}]))
    live = await asyncio.wait_for(read_all(run), 60)
    text = "".join(e.text for e in live if isinstance(e, TextDelta))
    assert text.startswith("The key is [REDACTED]") and secret not in text and secret[::-1] not in text
    assert all(secret not in e.model_dump_json() for e in live)
    assert text == (await run.result()).answer  # as the recorded reply, redacted the same way


async def test_a_run_that_fails_while_planned_or_is_cancelled_ends_its_stream_saying_so(client, settings, worker):
    rc = ratchet_client(client, settings)
    unplanned = await rc.start({"agent": "probe", "objective": "o", "model": {"provider": "nope"}})
    ends = [e for e in await asyncio.wait_for(read_all(unplanned), 60) if isinstance(e, RunEnded)]
    assert [e.phase for e in ends] == [Phase.FAILED] and "nope" in ends[0].error
    waiting = await rc.start(scripted("approver", [{"tool_calls": [{"name": "wait", "arguments": {"seconds": 600}}]}]))
    seen = []
    async for event in waiting.stream(topics=["steps", "answer"]):
        seen.append(event)
        if isinstance(event, ToolCallStarted):
            await waiting.cancel()
    assert isinstance(seen[-1], RunEnded) and seen[-1].phase == Phase.CANCELLED


def test_the_rest_of_a_reply_continues_where_its_last_batch_ended():
    """What the workflow publishes of a reply (workflows/events.py `rest_of`) picks up at the
    characters the activity's batches reached, so a reader sees each character once."""
    from ratchet.contracts.events import rest_of_reply

    content, calls = "Reading the file now.", [("read_file", '{"path": "a.py"}'), ("list_files", "{}")]
    nothing = rest_of_reply(3, 2, (False, 0, {}), content, calls)
    assert [type(e) for e in nothing] == [AttemptStarted, TextDelta, ToolCallDelta, ToolCallDelta]
    assert nothing[0].supersedes == 1 and nothing[1].text == content and nothing[2].name == "read_file"

    rest = rest_of_reply(3, 1, (True, 8, {0: 5}), content, calls)  # "Reading " and '{"pat' went out
    assert [type(e) for e in rest] == [TextDelta, ToolCallDelta, ToolCallDelta]
    assert (rest[0].at, rest[0].text) == (8, "the file now.")
    assert (rest[1].index, rest[1].name, rest[1].at, rest[1].arguments) == (0, "", 5, 'h": "a.py"}')
    assert (rest[2].index, rest[2].name, rest[2].arguments) == (1, "list_files", "{}")
    live = LiveText()
    shown = live.feed(AttemptStarted(step=3, call="model", attempt=1))
    shown += live.feed(TextDelta(step=3, call="model", attempt=1, at=0, text="Reading "))
    shown += "".join(live.feed(e) for e in rest)
    assert shown == content

    assert rest_of_reply(3, 1, (True, len(content), {0: 16, 1: 2}), content, calls) == [], "all of it went out"
