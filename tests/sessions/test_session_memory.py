"""Memory across sessions (#24 item 6): `remember`, `recall` and `forget` over the ledger's
database, scoped by the run's `memory_scope`; a write is an effect with an undo, so rolling back a
turn forgets what it remembered, and a later session of the same scope recalls what an earlier
one stored (dev server, scripted model, the real SQLite file)."""

from __future__ import annotations

import uuid

from ratchet.stores.memory import MemoryStore
from tests.runs import call, start, wait_for
from tests.sessions.test_sessions import awaiting, session

SCRIPT = [
    {"tool_calls": [call("remember", key="colour", value="blue")]},
    {"content": "noted your colour"},
    {"tool_calls": [call("remember", key="pet", value="cat"), call("forget", key="colour")]},
    {"content": "noted your pet, forgot your colour"},
]


async def test_memory_is_scoped_undone_with_its_turn_and_recalled_by_a_later_session(client, settings, worker):
    scope = f"user-{uuid.uuid4().hex[:8]}"
    store = MemoryStore.sqlite(settings.ledger_path)
    run = await start(client, settings, {**session(SCRIPT), "memory_scope": scope})
    await wait_for(run, awaiting)
    assert store.recall(scope, "") == [("colour", "blue")]
    assert (await run.ask("I have a cat; and forget my colour")).turn == 2
    assert store.recall(scope, "") == [("pet", "cat")]

    outcome = await run.rollback("turn-1")  # turn 2 undone: the pet forgotten, the colour back
    assert outcome.turns_removed == [2] and len(outcome.report.undone) == 2
    assert store.recall(scope, "") == [("colour", "blue")]
    assert store.recall(f"{scope}-other", "") == []
    await run.close()

    later = [{"tool_calls": [call("recall", query="col")]}, {"content": "your colour is blue"}]
    second = await start(client, settings, {**session(later, objective="what is my colour?"), "memory_scope": scope})
    state = await wait_for(second, awaiting)
    [recalled] = [r for r in state.calls.tool_calls.items if r.tool == "recall"]
    assert recalled.result.output == "colour: blue"
    await second.close()


async def test_a_run_without_a_memory_scope_is_told_so(client, settings, worker):
    script = [{"tool_calls": [call("recall")]}, {"content": "no memory"}]
    run = await start(client, settings, session(script))
    state = await wait_for(run, awaiting)
    assert "no memory_scope" in state.calls.tool_calls.items[-1].result.output
    await run.close()
