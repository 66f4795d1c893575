"""`ratchet mcp`, driven by the official MCP SDK's client as an assistant would: a real `ratchet mcp`
subprocess over stdio, the dev server and a worker; start runs, follow them, approve a call, send
a message, plan and do a rollback, and see refusals as tool errors."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

pytestmark = pytest.mark.e2e  # processes as a user runs them: `make test-e2e`, not `make test`

def scripted_model(*replies: dict) -> dict:
    return {"provider": "scripted", "options": {"script": list(replies)}}


def tool_call(name: str, **arguments) -> dict:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


async def use(mcp: Client, tool: str, **arguments) -> Any:
    result = await mcp.call_tool(tool, arguments)
    assert not result.is_error, result.content
    structured = result.structured_content
    return structured.get("result", structured) if isinstance(structured, dict) and set(structured) == {"result"} else structured


async def mcp_state_until(mcp: Client, workflow_id: str, predicate, timeout: float = 30) -> dict:
    """The run's state, read over MCP (`run_state`), once `predicate` holds of it."""
    async with asyncio.timeout(timeout):
        while True:
            result = await mcp.call_tool("run_state", {"workflow_id": workflow_id})
            if not result.is_error and predicate(result.structured_content):
                return result.structured_content
            await asyncio.sleep(0.2)


async def test_an_assistant_drives_runs_over_mcp(settings, worker):
    server = StdioServerParameters(command=sys.executable, args=["-m", "ratchet.cli.main", "mcp"], env={
        "TEMPORAL_ADDRESS": settings.temporal_address, "RATCHET_TASK_QUEUE": settings.task_queue,
    })
    async with Client(server) as mcp:
        tools = {t.name: t for t in (await mcp.list_tools()).tools}
        assert set(tools) == {"start_run", "run_state", "transcript", "approve", "reject", "inbox", "respond", "send_message", "ask_session", "rollback_plan", "rollback", "shadow", "shadow_report"}
        assert tools["run_state"].annotations.read_only_hint and tools["rollback"].annotations is None

        ship = await use(mcp, "start_run", agent="approver", objective="ship it", model=scripted_model(
            tool_call("create_ticket", title="prod deploy"), {"content": "shipped"}))
        waiting = await mcp_state_until(mcp, ship["workflow_id"], lambda s: s["pending_approvals"])
        refused = await mcp.call_tool("approve", {"workflow_id": ship["workflow_id"], "call_id": "call_9_9"})
        assert refused.is_error and "approve refused" in refused.content[0].text
        await use(mcp, "approve", workflow_id=ship["workflow_id"], call_id=waiting["pending_approvals"][0]["call_id"])
        done = await mcp_state_until(mcp, ship["workflow_id"], lambda s: s["phase"] == "DONE")
        assert done["answer"] == "shipped"
        page = await use(mcp, "transcript", workflow_id=ship["workflow_id"])
        assert page["messages"][-1]["content"] == "shipped" and page["total"] == len(page["messages"])

        chat = await use(mcp, "start_run", agent="chatter", objective="hello?", model=scripted_model(
            {"content": "one"}, {"content": "two"}))
        await mcp_state_until(mcp, chat["workflow_id"], lambda s: s["phase"] == "AWAITING_MESSAGE")
        answered = await use(mcp, "ask_session", workflow_id=chat["workflow_id"], text="and again?", message_id="m-2")
        assert (answered["turn"], answered["answer"]) == (2, "two")

        saga = await use(mcp, "start_run", agent="saga", objective="two steps", workspace="mcp-control", model=scripted_model(
            tool_call("write_file", path="a.txt", content="v1\n"), tool_call("write_file", path="a.txt", content="v2\n"),
            tool_call("probe_wait", seconds=3), {"content": "finished"}))
        wid = saga["workflow_id"]
        await mcp_state_until(mcp, wid, lambda s: len(s["checkpoints"]) == 2)
        assert "sent to" in await use(mcp, "send_message", workflow_id=wid, text="please stop soon")
        plan = await use(mcp, "rollback_plan", workflow_id=wid, checkpoint_id="cp-1")
        assert [(p["tool"], p["action"]) for p in plan] == [("write_file", "undo")]
        outcome = await use(mcp, "rollback", workflow_id=wid, checkpoint_id="cp-1", then="stop")
        assert outcome["running"] and len(outcome["report"]["undone"]) == 1
        await mcp_state_until(mcp, wid, lambda s: s["phase"] == "ROLLED_BACK")
        assert (settings.workspace_root / "mcp-control" / "a.txt").read_text() == "v1\n"
        # the run is closed now: its plan and its rollback go through a RollbackWorkflow, as with the CLI
        plan = await use(mcp, "rollback_plan", workflow_id=wid, checkpoint_id="start")
        assert [(p["tool"], p["action"]) for p in plan] == [("write_file", "undo")]  # v1; v2 was undone
        outcome = await use(mcp, "rollback", workflow_id=wid, checkpoint_id="start")
        assert not outcome["running"] and outcome["rollback_workflow_id"] == f"{wid}/rollback/start"
        assert len(outcome["report"]["undone"]) == 1 and not (settings.workspace_root / "mcp-control" / "a.txt").exists()
        bad = await mcp.call_tool("start_run", {"agent": "saga", "objective": ""})
        assert bad.is_error and "objective" in bad.content[0].text


async def test_an_assistant_shadows_a_run_over_mcp(settings, worker):
    server = StdioServerParameters(command=sys.executable, args=["-m", "ratchet.cli.main", "mcp"], env={
        "TEMPORAL_ADDRESS": settings.temporal_address, "RATCHET_TASK_QUEUE": settings.task_queue,
        "RATCHET_ARTIFACT_DIR": str(settings.artifact_dir),
    })
    async with Client(server) as mcp:
        run = await use(mcp, "start_run", agent="saga", objective="write it", model=scripted_model(
            tool_call("write_file", path="a.txt", content="v1\n"), {"content": "written"}))
        await mcp_state_until(mcp, run["workflow_id"], lambda s: s["phase"] == "DONE")
        report = await use(mcp, "shadow", runs=[run["workflow_id"]], model="recorded")
        assert report["totals"]["runs"] == 1 and report["totals"]["same"] == 1, report
        again = await use(mcp, "shadow_report", batch=report["batch"])
        assert again["totals"] == report["totals"]
        refused = await mcp.call_tool("shadow", {"runs": [run["workflow_id"]], "budget_usd": 0})
        assert refused.is_error and "budget_usd: must be above 0" in refused.content[0].text


async def test_an_assistant_answers_a_run_handed_to_a_person_over_mcp(settings, worker):
    server = StdioServerParameters(command=sys.executable, args=["-m", "ratchet.cli.main", "mcp"], env={
        "TEMPORAL_ADDRESS": settings.temporal_address, "RATCHET_TASK_QUEUE": settings.task_queue,
    })
    async with Client(server) as mcp:
        run = await use(mcp, "start_run", agent="asker", objective="ship it?", model=scripted_model(
            tool_call("handoff", to="person:alice", summary="ready; ship?"), {"content": "not reached"}))
        await mcp_state_until(mcp, run["workflow_id"], lambda s: s["phase"] == "AWAITING_PERSON")
        async with asyncio.timeout(30):  # visibility follows the run's search attributes a moment later
            while not (mine := [i for i in await use(mcp, "inbox", person="alice") if i["workflow_id"] == run["workflow_id"]]):
                await asyncio.sleep(0.2)
        assert [(i["handoff"]["summary"], i["handoff"]["from_agent"]) for i in mine] == [("ready; ship?", "asker")]
        refused = await mcp.call_tool("respond", {"workflow_id": run["workflow_id"], "action": "hand_back", "text": "x", "to": "ops"})
        assert refused.is_error and "cannot hand back to 'ops'" in refused.content[0].text
        await use(mcp, "respond", workflow_id=run["workflow_id"], action="finish", text="shipped", by="alice")
        done = await mcp_state_until(mcp, run["workflow_id"], lambda s: s["phase"] == "DONE")
        assert done["answer"] == "shipped"
