"""Where a rollback of a running run goes back to (workflows/rollback.py), through ratchet.client:
the run's start (`start`, as for a closed run), and the refusal of an unknown target."""

from __future__ import annotations

import asyncio
import sqlite3
import uuid

import pytest

from ratchet.activities.tracker_tools import TrackerSettings
from ratchet.client import RatchetClient, Refused
from ratchet.contracts import Phase
from tests.runs import scripted


def write(path: str, content: str) -> dict:
    return {"name": "write_file", "arguments": {"path": path, "content": content}}


SCRIPT = [
    {"tool_calls": [write("a.txt", "v1\n"), {"name": "create_ticket", "arguments": {"title": "t1"}}]},
    {"tool_calls": [write("a.txt", "v2\n")]},
    {"tool_calls": [{"name": "probe_wait", "arguments": {"seconds": 30}}]},
    {"content": "finished"},
]


def tickets(settings) -> list[str]:
    with sqlite3.connect(TrackerSettings().path) as conn:
        return [t for (t,) in conn.execute("SELECT title FROM tickets ORDER BY id")]


async def until_checkpoints(run, count: int) -> None:
    async with asyncio.timeout(30):
        while len((await run.state()).effects.checkpoints.items) < count:
            await asyncio.sleep(0.1)


async def test_a_running_run_rolls_back_to_its_start(client, settings, worker):
    runs = RatchetClient(client, settings)
    workspace = f"rs-{uuid.uuid4().hex[:6]}"
    (settings.workspace_root / workspace).mkdir(parents=True)
    (settings.workspace_root / workspace / "a.txt").write_text("before\n")
    run = await runs.start(scripted("saga", SCRIPT, objective="edit a.txt", workspace=workspace))
    await until_checkpoints(run, 2)
    plan = await run.rollback_plan("start")
    assert [(p.tool, p.action) for p in plan] == [("write_file", "undo"), ("create_ticket", "undo"), ("write_file", "undo")]

    outcome = await run.rollback("start", then="stop")
    assert outcome.running and outcome.complete, outcome.summary()
    assert len(outcome.report.undone) == 3
    assert (await run.result()).phase == Phase.ROLLED_BACK
    assert (settings.workspace_root / workspace / "a.txt").read_text() == "before\n"
    assert "t1" not in tickets(settings)
    state = await run.state()
    assert state.effects.checkpoints.items == [] and state.effects.stack.items == []
    assert [(m.role, m.content) for m in state.conversation.messages.items][1:] == [("user", "edit a.txt")]


async def test_an_unknown_target_is_refused_naming_the_checkpoints_and_start(client, settings, worker):
    runs = RatchetClient(client, settings)
    run = await runs.start(scripted("saga", SCRIPT, workspace=f"ru-{uuid.uuid4().hex[:6]}"))
    await until_checkpoints(run, 2)
    with pytest.raises(Refused) as refused:
        await run.rollback("cp-9")
    assert "unknown checkpoint 'cp-9'; this run has: cp-1, cp-2 (or 'start': every effect)" in str(refused.value)
    await run.cancel()
