"""Webhooks out (issue #43, item 3): a profile's `notify` targets are told of the run's events by
`RatchetNotify` deliveries (abandoned children: the run never waits for a receiver), each signed,
each with an Idempotency-Key that every attempt repeats. A real receiver process is killed mid-run:
what the run publishes meanwhile arrives once it is back, once."""

from __future__ import annotations

import json
import sys

from devtools.workers import WorkerProcess
from ratchet.contracts import Phase
from tests.ops_workers import ROOT
from tests.runs import call, scripted, start, until, wait_for
from tests.surfaces.test_serve import free_port

SECRET = "notify-secret-for-tests"


def receiver(port: int, path) -> WorkerProcess:
    return WorkerProcess(
        [sys.executable, "-m", "tests.notify_receiver", str(port), str(path), SECRET],
        cwd=ROOT,
        ready=f"receiver on {port}",
        name="webhook receiver",
    )


def received(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


async def test_a_receiver_killed_mid_run_gets_every_event_once_it_is_back(
    client, settings, worker, tmp_path, monkeypatch
):
    port, path = free_port(), tmp_path / "received.jsonl"
    monkeypatch.setenv("RATCHET_TEST_NOTIFY_PORT", str(port))
    monkeypatch.setenv("RATCHET_TEST_NOTIFY_SECRET", SECRET)
    script = [
        {"tool_calls": [call("write_file", path="a.txt", content="a\n")]},
        {"tool_calls": [call("create_ticket", title="prod: deploy")]},
        {"content": "deployed"},
    ]
    up = await receiver(port, path).start(timeout=30)
    run = await start(client, settings, scripted("notified", script, workspace="notified-ws"))
    state = await wait_for(run, lambda s: s.phase == Phase.AWAITING_APPROVAL)
    await until(lambda: len(received(path)) >= 2 or None, "the checkpoint and the approval request received")
    await up.stop()  # the receiver is gone while the run ends

    [pending] = state.calls.pending_approvals
    await run.approve(pending.call_id)
    assert (await run.result()).phase == Phase.DONE  # the run did not wait for the receiver
    assert [e for e in received(path) if e["event"] == "run_ended"] == []

    back = await receiver(port, path).start(timeout=30)
    try:
        events = await until(lambda: (lambda got: got if len(got) >= 4 else None)(received(path)), "every event")
    finally:
        await back.stop()
    kinds = [e["event"] for e in events]
    assert sorted(kinds) == ["approval_requested", "checkpoint", "checkpoint", "run_ended"], kinds
    assert all(e["signed"] for e in events) and len({e["key"] for e in events}) == len(events)
    ended = next(e for e in events if e["event"] == "run_ended")["body"]
    assert ended["run_id"] == run.workflow_id and ended["agent"] == "notified" and ended["data"]["phase"] == "DONE"
    assert ended["data"]["answer"] == "deployed"
    approval = next(e for e in events if e["event"] == "approval_requested")
    assert (
        approval["key"].startswith(f"{run.workflow_id}/notify/") and approval["body"]["data"]["tool"] == "create_ticket"
    )
    query = f'WorkflowType="RatchetNotify" AND WorkflowId STARTS_WITH "notify-{run.workflow_id}-"'
    await until(lambda: _count_is(client, query, 4), "four RatchetNotify deliveries listed")


async def _count_is(client, query: str, n: int) -> bool:
    return (await client.count_workflows(query)).count == n
