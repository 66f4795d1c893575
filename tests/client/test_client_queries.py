"""A query the worker dropped is asked again. sdk-core drops a query it buffered behind a workflow
task when that task evicts the run ("There were leftover buffered tasks when evicting run": a worker
whose cache is off, as here, or full), and the server waits for an answer that never comes; before
the client asked a query again (`RunCalls.query`, ratchet/client/rpc.py), such a query ended in
"Timeout expired" after 30 s (CI, a run page of the console, an AG-UI message)."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from ratchet.client import RatchetClient
from ratchet.client import rpc as client_rpc
from ratchet.worker.main import build_worker
from tests.runs import scripted

pytestmark = pytest.mark.e2e  # a minute of queries racing workflow tasks: `make test-e2e`

QUERIERS, QUERIES = 4, 25


async def test_queries_racing_evicting_workflow_tasks_are_all_answered(client, settings, monkeypatch):
    monkeypatch.setattr(client_rpc, "QUERY_FIRST_WAIT_S", 2.0)  # a dropped query is asked again sooner
    monkeypatch.setattr(client_rpc, "QUERY_LONGEST_WAIT_S", 4.0)  # and holds the run's one buffered place shorter
    # Four queriers share the run's one buffered place: the SDK's client itself asks a query the server
    # refused as busy again, five times over about 15 s (measured), before `RunCalls.query` sees it; a
    # query in this storm can take longer than a person's 35 s and still be answered.
    monkeypatch.setattr(client_rpc, "QUERY_DEADLINE_S", 90.0)
    uncached = settings.model_copy(update={"max_cached_workflows": 0})  # every workflow task evicts the run
    script = [{"tool_calls": [{"name": "create_ticket", "arguments": {"title": "prod outage", "body": "x"}}]}]
    async with build_worker(client, uncached, graceful_shutdown_timeout=timedelta(0)):
        run = await RatchetClient(client, uncached).start(scripted("approver", script))
        async with asyncio.timeout(30):
            while not (await run.state()).calls.pending_approvals:
                await asyncio.sleep(0.1)
        asked = asyncio.Event()

        async def messages() -> None:  # a workflow task every 0.2 s
            for number in range(1_000):
                if asked.is_set():
                    return
                await run.send(f"message {number}")
                await asyncio.sleep(0.2)

        async def reader() -> None:  # the stream's poll updates: more workflow tasks
            async for _ in run.stream():
                pass

        async def querier() -> list[int]:
            return [len((await run.state()).session.inbox) for _ in range(QUERIES)]

        sending, reading = asyncio.create_task(messages()), asyncio.create_task(reader())
        try:
            answered = await asyncio.wait_for(asyncio.gather(*(querier() for _ in range(QUERIERS))), 240)
        finally:
            asked.set()
            reading.cancel()
            await sending
    assert [len(a) for a in answered] == [QUERIES] * QUERIERS
    assert all(a == sorted(a) for a in answered)  # each querier saw the inbox only grow
