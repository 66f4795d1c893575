"""Approvals, messages and search attributes through the plain `temporal` CLI on the dev server."""

from __future__ import annotations

import json
import sqlite3

import pytest

from ratchet.activities.tracker_tools import TrackerSettings
from ratchet.contracts import AGENT_WORKFLOW, AgentResult, Phase
from tests.runs import ratchet, scripted, start, temporal_cli, until, wait_for

pytestmark = pytest.mark.e2e  # processes as a user runs them: `make test-e2e`, not `make test`

TWO_PROD_TICKETS = [
    {"tool_calls": [
        {"name": "create_ticket", "arguments": {"title": "prod: restart api"}},
        {"name": "create_ticket", "arguments": {"title": "prod: drop table"}},
        {"name": "create_ticket", "arguments": {"title": "staging: warm cache"}},
    ]},
    {"content": "done with tickets"},
]


async def listed(address: str, query: str) -> set[str]:
    code, out = await temporal_cli(address, "workflow", "list", "--query", query, "--output", "json")
    assert code == 0, out
    return {row["execution"]["workflowId"] for row in json.loads(out or "[]")}


async def test_approve_reject_message_and_find_waiting_runs(client, settings, worker, dev_server):
    address = dev_server.address
    handle = await start(client, settings, scripted("approver", TWO_PROD_TICKETS, workspace="appr"))
    idle = await start(client, settings, scripted("approver", [{"tool_calls": [{"name": "wait", "arguments": {"seconds": 60}}]}]))
    await wait_for(handle, lambda s: len(s.calls.pending_approvals) == 2)
    state = await handle.state()
    assert state.phase == Phase.AWAITING_APPROVAL
    restart, drop = (p.call_id for p in state.calls.pending_approvals)

    query = f'RatchetPhase="AWAITING_APPROVAL" AND TaskQueue="{settings.task_queue}"'
    assert await until(lambda: listed(address, query), "the waiting run listed") == {handle.workflow_id}
    assert handle.workflow_id in await listed(address, "RatchetAwaitingApproval=true")
    assert idle.workflow_id not in await listed(address, "RatchetAwaitingApproval=true")

    code, out = await temporal_cli(address, "workflow", "update", "execute", "--workflow-id", handle.workflow_id,
                                   "--name", "approve", "--input", json.dumps({"call_id": "call_9_9"}))
    assert code != 0 and "no pending approval for call 'call_9_9'" in out

    code, out = await temporal_cli(address, "workflow", "signal", "--workflow-id", handle.workflow_id,
                                   "--name", "send_message", "--input", json.dumps("please be careful"))
    assert code == 0, out
    code, out = await temporal_cli(address, "workflow", "update", "execute", "--workflow-id", handle.workflow_id,
                                   "--name", "approve", "--input", json.dumps({"call_id": restart}))
    assert code == 0, out
    code, out = await temporal_cli(address, "workflow", "update", "execute", "--workflow-id", handle.workflow_id,
                                   "--name", "approve", "--input", json.dumps({"call_id": restart}))
    assert code != 0 and "already decided: approved by " in out
    code, out = await temporal_cli(address, "workflow", "update", "execute", "--workflow-id", handle.workflow_id,
                                   "--name", "reject", "--input", json.dumps({"call_id": drop, "reason": "never in prod"}))
    assert code == 0, out

    result: AgentResult = await handle.result()
    assert result.phase == Phase.DONE
    with sqlite3.connect(TrackerSettings().path) as conn:
        titles = {t for (t,) in conn.execute("SELECT title FROM tickets")}
    assert titles == {"prod: restart api", "staging: warm cache"}

    code, out = await temporal_cli(address, "workflow", "query", "--workflow-id", handle.workflow_id,
                                   "--name", "state", "--output", "json")
    final = json.loads(out)["queryResult"][0]
    contents = [m.get("content") for m in final["conversation"]["messages"]["items"]]  # defaults are left out of payloads
    assert "ERROR: a person rejected this call: never in prod" in contents
    assert contents.count("please be careful") == 1
    assert handle.workflow_id not in await listed(address, query)
    await idle.terminate("test over")


async def test_ratchet_approve_send_and_watch(client, settings, worker):
    script = [{"tool_calls": [{"name": "create_ticket", "arguments": {"title": "prod: page on-call"}}]}, {"content": "paged"}]
    handle = await start(client, settings, scripted("approver", script, workspace="appr2"))
    await wait_for(handle, lambda s: len(s.calls.pending_approvals) == 1)
    code, out = await ratchet(settings, "watch", handle.workflow_id, "--once")
    assert code == 0 and "[AWAITING_APPROVAL]" in out and "awaiting approval: call_1_0 create_ticket" in out, out
    code, out = await ratchet(settings, "send", handle.workflow_id, "thanks")
    assert code == 0, out
    code, out = await ratchet(settings, "reject", handle.workflow_id, "call_9_9")
    assert code == 1 and "no pending approval for call 'call_9_9'" in out, out
    code, out = await ratchet(settings, "approve", handle.workflow_id, "call_1_0")
    assert code == 0 and "approved call_1_0" in out, out
    code, out = await ratchet(settings, "watch", handle.workflow_id)
    assert code == 0 and "[DONE]" in out and "\npaged\n" in out, out  # the answer, as the model wrote it
    assert "thanks" in [m.content for m in (await handle.state()).conversation.messages.items]


async def test_a_temporal_schedule_starts_recurring_agents(client, settings, worker, dev_server):
    address, schedule_id = dev_server.address, f"nightly-{settings.task_queue}"
    run = scripted("probe", [{"tool_calls": [{"name": "probe_append", "arguments": {"label": "tick"}}]}, {"content": "tick done"}],
                   workspace="nightly")
    code, out = await temporal_cli(
        address, "schedule", "create", "--schedule-id", schedule_id, "--interval", "24h",
        "--type", AGENT_WORKFLOW, "--task-queue", settings.task_queue,
        "--workflow-id", f"{schedule_id}-run", "--input", json.dumps(run),
    )
    assert code == 0, out
    try:
        code, out = await temporal_cli(address, "schedule", "trigger", "--schedule-id", schedule_id)
        assert code == 0, out
        log = settings.workspace_root / "nightly" / "probe.log"
        await until(lambda: log.exists() and "tick" in log.read_text(), "the scheduled run's tool call")
    finally:
        await temporal_cli(address, "schedule", "delete", "--schedule-id", schedule_id)
