"""The live part of a run's page, as a browser uses it: over real HTTP (uvicorn; httpx's ASGI
transport buffers a whole response, so it cannot hold a stream open), on the dev server with a
real worker. Pages reloaded again and again must not block the run's updates: every reader of a
run's stream in the console shares one (ratchet/client/shared_stream.py)."""

from __future__ import annotations

import asyncio
import json

import httpx2 as httpx
import uvicorn

from devtools.devserver import free_port
from ratchet.client import RatchetClient
from ratchet.console.app import build_app
from ratchet.contracts import Phase
from ratchet.ops.http_guard import HttpGuard
from tests.runs import call, until, wait_for


async def test_reloads_of_a_waiting_runs_page_do_not_block_its_approval(client, settings, worker):
    rc = RatchetClient(client, settings)
    script = [{"tool_calls": [call("create_ticket", title="prod reloads")]}, {"content": "opened"}]
    run = await rc.start({"agent": "ops", "objective": "reload", "model": {"provider": "scripted", "options": {"script": script}}})
    call_id = (await wait_for(run, lambda s: s.calls.pending_approvals)).calls.pending_approvals[0].call_id
    app = build_app(RatchetClient(client, settings), HttpGuard.for_server("127.0.0.1", same_origin=True))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=free_port(), log_level="warning"))
    serving = asyncio.create_task(server.serve())
    await until(lambda: server.started, "the console listening")
    base = f"http://127.0.0.1:{server.config.port}"
    events = f"/runs/{run.workflow_id}/events?from_offset={await run.stream_end()}"
    seen: list[str] = []

    async def stay(http: httpx.AsyncClient) -> None:  # one page left open: it sees what happens next
        async with http.stream("GET", events) as response:
            async for line in response.aiter_lines():
                if line.startswith("data:"):
                    seen.append(json.loads(line[5:])["kind"])

    try:
        async with httpx.AsyncClient(base_url=base, timeout=30) as http:
            staying = asyncio.create_task(stay(http))
            for _ in range(25):  # 25 reloads, each opening the page's stream and leaving it
                async with http.stream("GET", events) as response:
                    assert response.status_code == 200
                    await anext(response.aiter_bytes())
            await run.approve(call_id)  # refused with "limit on number of concurrent in-flight updates" before
            assert (await run.result()).phase == Phase.DONE
            await asyncio.wait_for(staying, 30)  # the stream ends with the run
        assert "approval_decided" in seen and seen[-1] == "end", seen
    finally:
        server.should_exit = True
        await serving
