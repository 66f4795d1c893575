"""Memory across sessions on the shared Postgres ledger (#24 item 6, across hosts): the store's
rules on both of its databases (SQLite and a real PostgreSQL server), then a session on one host
remembers and a session of the same scope on another host recalls it, each worker on the shared
ledger (dev server, scripted model)."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from ratchet.stores.memory import MemoryStore
from tests.ops_workers import start_worker
from tests.runs import call, start, wait_for
from tests.sessions.test_sessions import awaiting, session

pytestmark = pytest.mark.e2e  # a Postgres server and worker processes: `make test-e2e`


@pytest.fixture(params=["sqlite", "postgres"])
def store(request, tmp_path) -> MemoryStore:
    if request.param == "sqlite":
        return MemoryStore.sqlite(tmp_path / "ledger.sqlite3")
    return MemoryStore.postgres(request.getfixturevalue("postgres_server").create_database())


def test_a_write_logs_what_it_replaced_first_attempt_wins_and_its_undo_puts_it_back(store: MemoryStore):
    assert store.write("run/1/a", "u1", "colour", "blue") is None
    assert store.write("run/2/a", "u1", "colour", "green") == "blue"
    assert store.write("run/2/a", "u1", "colour", "green") == "blue"  # a retry: what the first attempt found
    assert store.recall("u1", "") == [("colour", "green")]
    assert store.write("run/3/a", "u1", "colour", None) == "green"  # forget
    assert store.recall("u1", "") == []
    assert store.undo("run/3/a") == "colour" and store.recall("u1", "") == [("colour", "green")]
    assert store.undo("run/2/a") == "colour" and store.recall("u1", "") == [("colour", "blue")]
    assert store.undo("run/never") is None
    assert store.recall("u2", "") == []  # scoped


def test_recall_matches_text_literally_not_as_a_pattern(store: MemoryStore):
    store.write("k1", "u", "100% sure", "a_b")
    store.write("k2", "u", "other", "axb")
    assert store.recall("u", "%") == [("100% sure", "a_b")]
    assert store.recall("u", "a_b") == [("100% sure", "a_b")]
    assert store.recall("u", "") == [("100% sure", "a_b"), ("other", "axb")]


def test_concurrent_writers_of_one_key_each_log_what_the_other_left(store: MemoryStore):
    keys = [f"call-{i}" for i in range(8)]
    with ThreadPoolExecutor(8) as pool:
        previous = list(pool.map(lambda k: store.write(k, "u", "n", k), keys))
    # one after the other: each found what exactly one other left (or nothing, the first), no update lost
    assert len(set(previous)) == len(keys) and None in previous
    [(_, last)] = store.recall("u", "n")
    assert set(previous) | {last} == set(keys) | {None}


async def test_a_session_on_another_host_recalls_what_one_remembered(client, settings, postgres_server, tmp_path):
    ledger = postgres_server.create_database()
    scope = f"user-{uuid.uuid4().hex[:8]}"

    def host(name: str) -> dict[str, str]:
        return {"RATCHET_LEDGER_URL": ledger, "RATCHET_HOST_ID": name, "RATCHET_WORKSPACE_ROOT": str(tmp_path / name)}

    remembering = [{"tool_calls": [call("remember", key="colour", value="blue")]}, {"content": "noted"}]
    worker_a = await start_worker(settings, **host("a"))
    try:
        first = await start(client, settings, {**session(remembering), "memory_scope": scope})
        await wait_for(first, awaiting)
        await first.close()
        await first.result()
    finally:
        assert await worker_a.stop() == 0
    assert MemoryStore.postgres(ledger).recall(scope, "") == [("colour", "blue")]

    recalling = [{"tool_calls": [call("recall", query="col")]}, {"content": "blue"}]
    worker_b = await start_worker(settings, **host("b"))
    try:
        second = await start(client, settings, {**session(recalling, objective="my colour?"), "memory_scope": scope})
        state = await wait_for(second, awaiting)
        [recalled] = [r for r in state.calls.tool_calls.items if r.tool == "recall"]
        assert recalled.result.output == "colour: blue"
        await second.close()
    finally:
        assert await worker_b.stop() == 0
