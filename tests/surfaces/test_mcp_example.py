"""The README's MCP example (examples/mcp_tracker/) as an operator runs it: a worker process with
RATCHET_MCP_SERVERS and the example's profile, a run that opens an issue over MCP, and the closed
run's rollback closing it through the profile's compensating tool."""

from __future__ import annotations

import json
import sqlite3
import sys

import pytest

from ratchet.contracts import Phase
from tests.ops_workers import PLUGINS, ROOT, start_worker
from tests.runs import ratchet, scripted, start

pytestmark = pytest.mark.e2e  # processes as a user runs them: `make test-e2e`, not `make test`

OPEN_ISSUE = [
    {"tool_calls": [{"name": "tracker__create_issue", "arguments": {"title": "printer on fire"}}]},
    {"content": "opened"},
]


def issues(db) -> list[tuple[str, int]]:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT title, open FROM issues").fetchall()


async def test_the_readme_mcp_example_opens_an_issue_and_its_rollback_closes_it(client, settings, tmp_path):
    with open(f"{ROOT}/examples/mcp_tracker/servers.json") as example:
        servers = json.load(example)
    tracker = servers["servers"]["tracker"]
    tracker["command"] = sys.executable  # the example's `python`, as this venv's
    tracker["env"]["TRACKER_DB"] = str(tmp_path / "tracker.db")
    (tmp_path / "servers.json").write_text(json.dumps(servers))
    worker = await start_worker(settings, RATCHET_MCP_SERVERS=str(tmp_path / "servers.json"),
                                RATCHET_PLUGINS=f"{PLUGINS},examples.mcp_tracker.profiles")
    try:
        handle = await start(client, settings, scripted("triage", OPEN_ISSUE, objective="open an issue"))
        assert (await handle.result()).phase == Phase.DONE
        assert issues(tmp_path / "tracker.db") == [("printer on fire", 1)]
        code, out = await ratchet(settings, "rollback", handle.workflow_id, "start")
        assert code == 0 and "undo" in out, out
        assert issues(tmp_path / "tracker.db") == [("printer on fire", 0)]
    finally:
        await worker.stop()
    # at its start the worker listed the server's tools once and said how many (ratchet/mcp/pool.py)
    assert "mcp server tracker (stdio): 5 tools: search_issues, create_issue, close_issue" in worker.output, worker.output
