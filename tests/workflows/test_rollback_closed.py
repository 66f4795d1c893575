"""Rolling back a closed run (`RollbackWorkflow`): from `ratchet rollback` and from the plain
`temporal` CLI, on the dev server, with real files, a SQLite tracker and the SQLite ledger."""

from __future__ import annotations

import json

import pytest
from temporalio.client import WorkflowFailureError

from ratchet.contracts import ROLLBACK_WORKFLOW, ClosedRollback, Phase, rollback_id
from ratchet.stores.ledger import EntryStatus, SqliteLedger
from ratchet.workflows.agent import AgentWorkflow
from tests.runs import call, ratchet, runs, scripted, start, temporal_cli, wait_for
from tests.workflows.test_rollback import ticket, tickets, write
from tests.workflows.test_sub_agents import CHILD_SCRIPT, delegate

# Two verified steps (cp-1, cp-2), then a final answer: the run ends DONE with every effect in place.
pytestmark = pytest.mark.e2e  # processes as a user runs them: `make test-e2e`, not `make test`

DONE_AFTER_TWO_CHECKPOINTS = [
    {"tool_calls": [write("a.txt", "v1\n"), ticket("t1")]},
    {"tool_calls": [write("a.txt", "v2\n"), write("b.txt", "new\n"), ticket("t2")]},
    {"content": "finished"},
]


def plan_lines(out: str) -> list[str]:
    return [line.strip() for line in out.splitlines() if line.strip().startswith(("undo ", "already_undone", "irreversible"))]


async def test_a_done_run_rolls_back_from_the_command_line_once(client, settings, worker):
    ws = settings.workspace_root / "closed"
    handle = await start(client, settings, scripted("saga", DONE_AFTER_TWO_CHECKPOINTS, workspace="closed"))
    assert (await handle.result()).phase == Phase.DONE
    assert tickets(settings) == ["t1", "t2"]

    code, out = await ratchet(settings, "rollback", handle.workflow_id, "cp-1", "--dry-run")
    assert code == 0, out
    dry = plan_lines(out)
    assert [line.split()[0] for line in dry] == ["undo"] * 3, out
    assert "delete ticket #2 (t2)" in dry[0] and "delete b.txt" in dry[1] and "restore a.txt (3 bytes)" in dry[2], out
    # the run's own rollback_plan query (a second implementation of the plan) says the same
    queried = await client.get_workflow_handle(handle.workflow_id).query(AgentWorkflow.rollback_plan, "cp-1")
    assert [i.description for i in queried] == ["delete ticket #2 (t2)", "delete b.txt", "restore a.txt (3 bytes)"]

    code, out = await ratchet(settings, "rollback", handle.workflow_id, "cp-1")
    assert code == 0, out
    assert plan_lines(out) == dry, "the dry run lists exactly what the rollback undid"
    assert (ws / "a.txt").read_text() == "v1\n" and not (ws / "b.txt").exists()
    assert tickets(settings) == ["t1"]
    rolled = client.get_workflow_handle(rollback_id(handle.workflow_id, "cp-1"), result_type=ClosedRollback)
    result = await rolled.result()
    assert result.status == "COMPLETED" and result.phase == Phase.DONE and result.report.clean
    assert [u.split()[2] for u in result.report.undone] == ["create_ticket", "write_file", "write_file"]
    ledger = SqliteLedger(settings.ledger_path)
    undo_keys = [f"{item.key}/undo" for item in result.plan]
    assert all(ledger.get(k).status == EntryStatus.COMPLETED and ledger.get(k).starts == 1 for k in undo_keys)

    (ws / "a.txt").write_text("edited by a person after the rollback\n")
    first_run = (await rolled.describe()).run_id
    code, out = await ratchet(settings, "rollback", handle.workflow_id, "cp-1")
    assert code == 0 and "before, by workflow" in out, out
    assert (await rolled.describe()).run_id == first_run, "the second request is the same workflow"
    assert (ws / "a.txt").read_text() == "edited by a person after the rollback\n"
    assert all(ledger.get(k).starts == 1 for k in undo_keys)

    code, out = await ratchet(settings, "rollback", handle.workflow_id, "cp-1", "--dry-run")
    assert code == 0 and [line.split()[0] for line in plan_lines(out)] == ["already_undone"] * 3, out


async def test_a_terminated_run_rolls_back_to_the_start_with_the_temporal_cli(client, settings, worker, dev_server):
    ws = settings.workspace_root / "term"
    script = [{"tool_calls": [write("c.txt", "x"), ticket("t")]}, {"tool_calls": [call("probe_wait", seconds=30)]}]
    handle = await start(client, settings, scripted("saga", script, workspace="term"))
    await wait_for(handle, lambda s: s.step == 2)
    request = {"workflow_id": handle.workflow_id, "checkpoint_id": "start"}

    async def start_rollback(workflow_id: str) -> ClosedRollback:
        code, out = await temporal_cli(
            dev_server.address, "workflow", "start", "--type", ROLLBACK_WORKFLOW, "--task-queue", settings.task_queue,
            "--workflow-id", workflow_id, "--id-reuse-policy", "AllowDuplicateFailedOnly", "--input", json.dumps(request),
        )
        assert code == 0, out
        return await client.get_workflow_handle(workflow_id, result_type=ClosedRollback).result()

    with pytest.raises(WorkflowFailureError) as refused:
        await start_rollback(rollback_id(handle.workflow_id, "start"))
    assert "is still running" in str(refused.value.cause)
    with pytest.raises(WorkflowFailureError) as misnamed:
        await start_rollback(f"{handle.workflow_id}-undo")
    assert f"workflow id '{rollback_id(handle.workflow_id, 'start')}'" in str(misnamed.value.cause)

    await handle.terminate("stuck")
    result = await start_rollback(rollback_id(handle.workflow_id, "start"))  # the refused one failed: allowed again
    assert result.status == "TERMINATED" and result.report.clean
    assert [(i.action, i.description) for i in result.plan] == [("undo", "delete ticket #1 (t)"), ("undo", "delete c.txt")]
    assert not (ws / "c.txt").exists() and tickets(settings) == []
    closed = await handle.state()  # the closed run itself is only read
    assert closed.effects.rollbacks == [] and len(closed.effects.stack.items) == 2


async def test_a_sub_agents_effects_undone_by_its_own_rollback_are_not_undone_again(client, settings, worker):
    script = [delegate(agent="saga", objective="make child.txt", model={"provider": "scripted", "options": {"script": CHILD_SCRIPT}}),
              {"content": "delegated"}]
    parent = await start(client, settings, scripted("boss", script, workspace="tree"))
    assert (await parent.result()).phase == Phase.DONE
    child_id = f"{parent.workflow_id}/1/call_1_0/child"

    async def roll_back(workflow_id: str, dry_run: bool = False) -> ClosedRollback:
        outcome = await runs(client, settings).get(workflow_id).rollback("start", dry_run=dry_run)
        assert not outcome.running and outcome.closed is not None
        return outcome.closed

    dry = await roll_back(parent.workflow_id, dry_run=True)
    assert [(i.action, i.description) for i in dry.plan] == [("undo", f"undo the 2 effects sub-agent {child_id} left in place")]
    child = await roll_back(child_id)  # the sub-agent's own closed run, rolled back first
    assert len(child.report.undone) == 2 and tickets(settings) == []
    assert not (settings.workspace_root / "tree" / "child.txt").exists()

    result = await roll_back(parent.workflow_id)
    assert [i.action for i in result.plan] == ["already_undone"] and result.report.undone == []
    ledger = SqliteLedger(settings.ledger_path)
    assert [ledger.get(f"{child_id}/1/{call}/undo").starts for call in ("call_1_0", "call_1_1")] == [1, 1]


async def test_an_undo_that_fails_stops_the_rollback_which_may_run_again(client, settings, worker):
    ws = settings.workspace_root / "doom"
    script = [{"tool_calls": [write("a.txt", "x")]}, {"tool_calls": [call("doomed_note", note="n")]}, {"content": "done"}]
    handle = await start(client, settings, scripted("saga", script, workspace="doom"))
    assert (await handle.result()).phase == Phase.DONE

    for _ in range(2):  # a failed rollback is not a finished one: the same request runs it again
        code, out = await ratchet(settings, "rollback", handle.workflow_id, "start")
        assert code == 1 and "rollback failed" in out and "before, by workflow" not in out, out
        assert "the archive is read-only" in out and "not undone: step 2 doomed_note" in out and "step 1 write_file" in out, out
        assert (ws / "a.txt").read_text() == "x", "nothing older than the failed undo is touched"
