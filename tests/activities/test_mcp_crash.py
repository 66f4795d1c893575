"""A run using an MCP tool survives a SIGKILLed worker with its side effect done exactly once: the
worker dies after the tracker (examples/mcp_tracker/tracker.py, streamable HTTP on loopback) opened the
issue and before the call's result was recorded; the next worker's retry carries the same
idempotency key in `_meta`, which the tracker deduplicates on (the profile says so: `idempotent`)."""

from __future__ import annotations

import asyncio
import json
import signal
import sqlite3
import uuid

import pytest

from ratchet.contracts import Phase
from tests.mcp_servers import http_tracker
from tests.ops_workers import start_worker
from tests.runs import activity_attempts, scripted, start, until

pytestmark = pytest.mark.e2e  # slow: `make test-e2e`, not `make test`

PLUGINS = "tests.plugins.probe,tests.mcp_servers.profiles"


def created(db, title: str) -> list[str]:
    if not db.exists():
        return []
    with sqlite3.connect(db) as conn:
        try:
            return [k for (k,) in conn.execute("SELECT key FROM effects WHERE tool = 'create_issue' AND detail = ?", (title,))]
        except sqlite3.OperationalError:  # the tracker created the file and not yet its table
            return []


async def test_a_sigkilled_worker_leaves_each_mcp_side_effect_done_once(client, settings, tmp_path):
    db = tmp_path / "tracker.db"
    first, second = f"first-{uuid.uuid4().hex[:6]}", f"second-{uuid.uuid4().hex[:6]}"
    script = [{"tool_calls": [{"name": "tracker__create_issue", "arguments": {"title": first, "delay_s": 3}}]},
              {"tool_calls": [{"name": "tracker__create_issue", "arguments": {"title": second}}]},
              {"content": "both open"}]
    with http_tracker(db) as url:
        servers = tmp_path / "servers.json"
        servers.write_text(json.dumps({"servers": {"tracker": {"url": f"{url}/mcp"}}}))
        env = {"RATCHET_MCP_SERVERS": str(servers), "RATCHET_PLUGINS": PLUGINS}
        doomed = await start_worker(settings, **env)
        handle = await start(client, settings, scripted("mcp_durable", script))
        await until(lambda: created(db, first), "the issue is open; the call has not answered")
        await doomed.stop(signal.SIGKILL)
        survivor = await start_worker(settings, **env)
        try:
            result = await asyncio.wait_for(handle.result(), 60)
        finally:
            assert await survivor.stop() == 0, survivor.output
    assert result.phase == Phase.DONE and result.answer == "both open"
    assert created(db, first) == [f"{handle.workflow_id}/1/call_1_0"] and created(db, second) == [f"{handle.workflow_id}/2/call_2_0"]
    assert await activity_attempts(handle, "mcp.tracker") == [2, 1], "the first call was retried after the kill, once"
