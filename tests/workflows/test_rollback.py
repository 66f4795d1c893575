"""Checkpoints, compensation and rollback on the dev server, with real files and a SQLite tracker."""

from __future__ import annotations

import os
import sqlite3

import pytest

from ratchet.activities.tracker_tools import TrackerSettings
from ratchet.client import Refused, RunCancelled, RunFailed
from ratchet.contracts import AgentResult, EffectStatus, Phase
from ratchet.stores.ledger import EntryStatus, SqliteLedger
from tests.plugins.probe import PROBE_LOG
from tests.runs import call, scripted, start, until, wait_for


def write(path: str, content: str) -> dict:
    return {"name": "write_file", "arguments": {"path": path, "content": content}}


def ticket(title: str) -> dict:
    return {"name": "create_ticket", "arguments": {"title": title}}


def tickets(settings) -> list[str]:
    if not TrackerSettings().path.exists():
        return []
    with sqlite3.connect(TrackerSettings().path) as conn:
        return [t for (t,) in conn.execute("SELECT title FROM tickets ORDER BY id")]


# Two verified steps (cp-1, cp-2), then a step that pauses so the test can act on the run.
TWO_CHECKPOINTS = [
    {"tool_calls": [write("a.txt", "v1\n"), ticket("t1")]},
    {"tool_calls": [write("a.txt", "v2\n"), write("b.txt", "new\n"), ticket("t2")]},
    {"tool_calls": [call("probe_wait", seconds=2)]},
    {"content": "finished"},
]


async def test_rollback_restores_files_and_tracker_newest_first(client, settings, worker):
    ws = settings.workspace_root / "rb"
    ws.mkdir(parents=True)
    (ws / "a.txt").write_bytes(b"original \x00 bytes\r\n")
    handle = await start(client, settings, scripted("saga", TWO_CHECKPOINTS, workspace="rb"))
    await wait_for(handle, lambda s: len(s.effects.checkpoints.items) == 2)
    assert tickets(settings) == ["t1", "t2"]
    plan = await handle.rollback_plan("cp-1")
    assert [(p.tool, p.action) for p in plan] == [("create_ticket", "undo"), ("write_file", "undo"), ("write_file", "undo")]

    report = (await handle.rollback("cp-1", then="stop")).report
    assert [u.split()[2] for u in report.undone] == ["create_ticket", "write_file", "write_file"]
    result: AgentResult = await handle.result()
    assert result.phase == Phase.ROLLED_BACK
    assert (ws / "a.txt").read_bytes() == b"v1\n"
    assert not (ws / "b.txt").exists()
    assert tickets(settings) == ["t1"]
    state = await handle.state()
    assert [c.id for c in state.effects.checkpoints.items] == ["cp-1"]
    assert len(state.conversation.messages.items) == state.effects.checkpoints.items[0].messages_len
    assert len(state.effects.stack.items) == state.effects.checkpoints.items[0].effects_len == 2


async def test_rollback_all_restores_bytes_that_existed_before_the_run(client, settings, worker):
    ws = settings.workspace_root / "rb0"
    ws.mkdir(parents=True)
    (ws / "a.txt").write_bytes(b"\xff\xfeoriginal")
    script = [{"tool_calls": [write("a.txt", "x")]}, {"tool_calls": [call("probe_fatal", note="boom")]}]
    handle = await start(client, settings, scripted("saga", script, workspace="rb0", on_failure="rollback_all"))
    with pytest.raises(RunFailed) as failure:
        await handle.result()
    assert "boom" in str(failure.value.reason)
    assert (ws / "a.txt").read_bytes() == b"\xff\xfeoriginal"
    state = await handle.state()
    assert state.phase == Phase.FAILED and state.effects.rollbacks[-1].clean and state.effects.stack.items == []


async def test_undo_that_fails_once_is_retried_and_runs_once(client, settings, worker):
    script = [{"tool_calls": [call("flaky_undo_note", note="n")]}, {"tool_calls": [call("probe_fatal", note="stop")]}]
    handle = await start(client, settings, scripted("saga", script, workspace="fu", on_failure="rollback_all"))
    with pytest.raises(RunFailed):
        await handle.result()
    state = await handle.state()
    assert state.phase == Phase.FAILED and state.effects.rollbacks[-1].clean
    key = f"{handle.workflow_id}/1/call_1_0"
    lines = (settings.workspace_root / "fu" / PROBE_LOG).read_text().splitlines()
    assert lines.count(f"undone {key}/undo") == 1
    entry = SqliteLedger(settings.ledger_path).get(f"{key}/undo")
    assert entry.status == EntryStatus.COMPLETED and entry.starts == 2


async def test_tool_retried_after_recording_does_not_act_twice(client, settings):
    from ratchet.worker.main import Activities, build_worker

    activities = Activities(settings, client)
    crashed: list[str] = []

    def crash_once(inv) -> None:
        if inv.key not in crashed:
            crashed.append(inv.key)
            raise RuntimeError("worker died before reporting completion")

    activities.tools.after_record = crash_once
    script = [{"tool_calls": [ticket("only once"), write("f.txt", "x")]}, {"content": "ok"}]
    async with build_worker(client, settings, activities):
        handle = await start(client, settings, scripted("saga", script, workspace="once"))
        assert (await handle.result()).phase == Phase.DONE
        state = await handle.state()
    assert len(crashed) == 2
    assert tickets(settings) == ["only once"]
    assert [r.result.ok for r in state.calls.tool_calls.items] == [True, True]


async def test_cancel_compensates_to_the_last_checkpoint(client, settings, worker):
    script = [
        {"tool_calls": [write("a.txt", "v1")]},
        {"tool_calls": [write("a.txt", "v2"), ticket("after cp-1")]},
        {"tool_calls": [call("probe_wait", seconds=30)]},
    ]
    # the verifier fails on step 2 (BROKEN marker), so only step 1 is a checkpoint
    script[1]["tool_calls"].append(write("BROKEN", "x"))
    handle = await start(client, settings, scripted("saga", script, workspace="cx"))
    await wait_for(handle, lambda s: s.step == 3)
    await handle.cancel()
    with pytest.raises(RunCancelled):
        await handle.result()
    state = await handle.state()
    assert state.phase == Phase.CANCELLED
    report = state.effects.rollbacks[-1]
    assert report.checkpoint_id == "cp-1" and len(report.undone) == 3 and report.clean
    ws = settings.workspace_root / "cx"
    assert (ws / "a.txt").read_text() == "v1" and not (ws / "BROKEN").exists()
    assert tickets(settings) == []


async def test_undo_that_always_fails_ends_in_compensation_failed(client, settings, worker):
    script = [
        {"tool_calls": [write("a.txt", "x")]},
        {"tool_calls": [call("doomed_note", note="forever")]},
        {"tool_calls": [call("probe_fatal", note="trigger rollback")]},
    ]
    handle = await start(client, settings, scripted("saga", script, workspace="cf", on_failure="rollback_all"))
    with pytest.raises(RunFailed) as failure:
        await handle.result()
    assert "compensation failed" in str(failure.value.reason) and "doomed_note" in str(failure.value.reason)
    state = await handle.state()
    assert state.phase == Phase.COMPENSATION_FAILED
    statuses = {e.tool: (e.status, e.error) for e in state.effects.stack.items}
    assert statuses["doomed_note"][0] == EffectStatus.UNDO_FAILED
    assert "read-only" in statuses["doomed_note"][1]
    assert statuses["write_file"][0] == EffectStatus.NOT_UNDONE


async def test_fork_from_a_closed_run_leaves_the_source_unchanged(client, settings, worker):
    source = await start(client, settings, scripted("saga", TWO_CHECKPOINTS, workspace="src"))
    assert (await source.result()).phase == Phase.DONE
    events_before = len((await source.history()).events)
    source_state = await source.state()
    cp1 = source_state.effects.checkpoints.items[0]

    fork_script = [{"content": "unused: the fork continues at the checkpoint's turn"}, {"content": "forked and done"}]
    fork = await start(
        client, settings,
        scripted("saga", fork_script, objective="continue from cp-1", workspace="fork",
                 resume_from={"workflow_id": source.workflow_id, "checkpoint_id": "cp-1"}),
    )
    result = await fork.result()
    assert result.phase == Phase.DONE and result.answer == "forked and done"
    forked = await fork.state()
    assert forked.conversation.messages.items[: cp1.messages_len] == source_state.conversation.messages.items[: cp1.messages_len]
    assert forked.conversation.messages.items[cp1.messages_len].content == "continue from cp-1" and forked.conversation.messages.items[cp1.messages_len].pinned
    assert forked.effects.checkpoints.items[0].messages_len == cp1.messages_len + 1, "a rollback to the fork's start keeps its objective"
    assert (settings.workspace_root / "fork" / "a.txt").read_text() == "v1\n"
    assert not (settings.workspace_root / "fork" / "b.txt").exists()
    assert len((await source.history()).events) == events_before
    assert (await source.state()) == source_state


async def test_fork_from_an_unknown_checkpoint_fails_clearly(client, settings, worker):
    source = await start(client, settings, scripted("saga", [{"content": "nothing"}], workspace="s2"))
    await source.result()
    fork = await start(client, settings, scripted("saga", [{"content": "x"}], resume_from={"workflow_id": source.workflow_id, "checkpoint_id": "cp-7"}))
    with pytest.raises(RunFailed) as failure:
        await fork.result()
    assert "has no checkpoint 'cp-7'" in str(failure.value.reason)


async def test_unknown_checkpoint_in_rollback_is_rejected_and_changes_nothing(client, settings, worker):
    handle = await start(client, settings, scripted("saga", TWO_CHECKPOINTS, workspace="uk"))
    await wait_for(handle, lambda s: len(s.effects.checkpoints.items) == 2)
    before = await handle.state()
    with pytest.raises(Refused) as failure:
        await handle.rollback("cp-9")
    assert "unknown checkpoint 'cp-9'; this run has: cp-1, cp-2" in str(failure.value.reason)
    assert (await handle.result()).phase == Phase.DONE
    after = await handle.state()
    assert after.effects.rollbacks == [] and after.effects.stack.items == before.effects.stack.items
    history = await handle.history()
    assert not any(e.HasField("workflow_execution_update_accepted_event_attributes") for e in history.events)


async def test_cancel_during_a_model_call_is_a_cancellation_not_a_failure(client, settings, worker, openai_server):
    key = os.environ["OPENAI_API_KEY"]
    openai_server.set_script([{"tool_calls": [write("a.txt", "v1")]}, {"content": "never"}], key=key)
    # the second call stalls, queued before the run starts: queued after step 1 it came too late
    # whenever the run had already asked its second question (it then ended DONE)
    openai_server.enqueue_faults([{"timeout": 0.01}, {"timeout": 8}], key=key)
    handle = await start(client, settings, {"agent": "saga", "objective": "x", "workspace": "cm"})
    await wait_for(handle, lambda s: len(s.effects.stack.items) == 1 and s.step == 2)
    await until(lambda: len(openai_server.chat_requests(key=key)) == 2, "the second model call at the stalled endpoint")
    await handle.cancel()
    with pytest.raises(RunCancelled):
        await handle.result()
    state = await handle.state()
    assert state.phase == Phase.CANCELLED
