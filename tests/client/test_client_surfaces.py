"""One scenario through every surface, with the same result: a run of the shipped `ops` profile
waits for approval of a production ticket, is approved, ends DONE, and once closed is rolled back
to its start (the ticket is undone by a RollbackWorkflow). Driven through `ratchet.client`, the
`ratchet` CLI (subprocesses) and `ratchet mcp` (the MCP SDK's client over stdio): all three are
layers over the same client, so they must agree."""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
import sys
import uuid

import pytest
from mcp import Client as McpClient
from mcp import StdioServerParameters

from ratchet.activities.tracker_tools import TrackerSettings
from ratchet.client import RatchetClient
from tests.runs import ratchet, until, wait_for
from tests.surfaces.test_mcp_control import mcp_state_until, use

pytestmark = pytest.mark.e2e  # processes as a user runs them: `make test-e2e`, not `make test`

def ops_run(title: str) -> dict:
    script = [{"tool_calls": [{"name": "create_ticket", "arguments": {"title": title}}]}, {"content": "opened"}]
    return {"agent": "ops", "objective": f"open {title}", "model": {"provider": "scripted", "options": {"script": script}}}


def ticket_exists(settings, title: str) -> bool:
    with sqlite3.connect(TrackerSettings().path) as conn:
        return conn.execute("SELECT count(*) FROM tickets WHERE title = ?", (title,)).fetchone()[0] == 1


async def through_the_client(client, settings, title: str) -> tuple:
    runs = RatchetClient(client, settings)
    run = await runs.start(ops_run(title), f"surfaces-client-{uuid.uuid4().hex[:6]}")
    state = await wait_for(run, lambda s: s.calls.pending_approvals)
    await run.approve(state.calls.pending_approvals[0].call_id)
    result = await run.result()
    opened = ticket_exists(settings, title)
    outcome = await run.rollback("start")
    assert not outcome.running and outcome.report is not None
    return state.calls.pending_approvals[0].call_id, result.phase, result.answer, opened, len(outcome.report.undone)


async def through_the_cli(settings, tmp_path, title: str) -> tuple:
    workflow_id = f"surfaces-cli-{uuid.uuid4().hex[:6]}"
    run_file = tmp_path / "run.json"
    run_file.write_text(json.dumps(ops_run(title)))
    code, out = await ratchet(settings, "start", "--file", str(run_file), "--id", workflow_id)
    assert code == 0, out

    async def waiting_call():
        return re.search(r"awaiting approval: (\S+)", (await ratchet(settings, "watch", workflow_id, "--once"))[1])

    waiting = await until(waiting_call, "`ratchet watch` shows the call awaiting approval")
    code, out = await ratchet(settings, "approve", workflow_id, waiting[1])
    assert code == 0, out
    code, out = await ratchet(settings, "result", workflow_id)
    assert code == 0, out
    result = json.loads(out)
    opened = ticket_exists(settings, title)
    code, out = await ratchet(settings, "rollback", workflow_id, "start")
    assert code == 0 and f"rollback workflow {workflow_id}/rollback/start" in out, out
    report = json.loads(out[out.index("{"):out.rindex("}") + 1])
    return waiting[1], result["phase"], result["answer"], opened, len(report["undone"])


async def through_mcp(settings, title: str) -> tuple:
    server = StdioServerParameters(command=sys.executable, args=["-m", "ratchet.cli.main", "mcp"], env={
        "TEMPORAL_ADDRESS": settings.temporal_address, "RATCHET_TASK_QUEUE": settings.task_queue,
    })
    async with McpClient(server) as mcp:
        run = ops_run(title)
        started = await use(mcp, "start_run", agent=run["agent"], objective=run["objective"], model=run["model"])
        workflow_id = started["workflow_id"]
        waiting = await mcp_state_until(mcp, workflow_id, lambda s: s["pending_approvals"])
        call_id = waiting["pending_approvals"][0]["call_id"]
        await use(mcp, "approve", workflow_id=workflow_id, call_id=call_id)
        done = await mcp_state_until(mcp, workflow_id, lambda s: s["phase"] == "DONE")
        opened = ticket_exists(settings, title)
        outcome = await use(mcp, "rollback", workflow_id=workflow_id, checkpoint_id="start")
        assert not outcome["running"]
        return call_id, done["phase"], done["answer"], opened, len(outcome["report"]["undone"])


async def test_the_client_the_cli_and_mcp_agree_on_approve_and_a_closed_runs_rollback(client, settings, worker, tmp_path):
    titles = {surface: f"prod deploy {surface} {uuid.uuid4().hex[:6]}" for surface in ("client", "cli", "mcp")}
    results = await asyncio.gather(
        through_the_client(client, settings, titles["client"]),
        through_the_cli(settings, tmp_path, titles["cli"]),
        through_mcp(settings, titles["mcp"]),
    )
    assert results[0] == ("call_1_0", "DONE", "opened", True, 1), results
    assert results[1] == results[0] and results[2] == results[0], results
    assert not any(ticket_exists(settings, title) for title in titles.values()), "every ticket undone"
