"""What the Temporal Web UI shows of a run (issue #25, item 6): its static summary (agent and
objective), its current details (what it waits for, the command that answers it, the last
checkpoint with its evidence line) and the summaries of undo activities (the file or ticket), on
the dev server with a real worker."""

from __future__ import annotations

import json
import uuid

from ratchet.client import RatchetClient
from ratchet.contracts.rollback import TO_START
from tests.runs import call, scripted, until, wait_for


async def test_a_waiting_run_says_what_it_waits_for_and_how_to_answer(client, settings, worker):
    script = [{"tool_calls": [call("create_ticket", title="prod deploy v3")]}, {"content": "opened"}]
    run = await RatchetClient(client, settings).start(
        {"agent": "ops", "objective": "open the prod ticket", "model": {"provider": "scripted", "options": {"script": script}}}
    )
    state = await wait_for(run, lambda s: s.calls.pending_approvals)
    call_id = state.calls.pending_approvals[0].call_id
    details = await until(lambda: _having(run, call_id), "the waiting call in the current details")
    assert "**AWAITING_APPROVAL**" in details and "`create_ticket`" in details
    assert '"title": "prod deploy v3"' in details
    assert f"ratchet approve {run.workflow_id} {call_id}" in details
    assert await (await run.describe()).static_summary() == "ops: open the prod ticket"
    await run.approve(call_id)
    await run.result()


async def test_the_last_checkpoint_and_its_evidence_are_in_the_details(client, settings, worker):
    script = [{"tool_calls": [call("write_file", path="a.txt", content="v1\n")]}, {"tool_calls": [call("probe_wait", seconds=30)]}]
    run = await RatchetClient(client, settings).start(scripted("saga", script, workspace="details-cp"))
    await wait_for(run, lambda s: s.effects.checkpoints.items)
    details = await until(lambda: _having(run, "Last checkpoint cp-1"), "the checkpoint in the current details")
    assert "-> exit 0" in details
    await run.cancel()


async def test_undo_activities_say_which_file_and_ticket_they_undo(client, settings, worker):
    script = [
        {"tool_calls": [call("write_file", path="src/app.py", content="v1\n")]},
        {"tool_calls": [call("create_ticket", title="undo me")]},
        {"tool_calls": [call("wait", seconds=60)]},
    ]
    run = await RatchetClient(client, settings).start(
        scripted("hosts", script, workspace=f"undo-summary-{uuid.uuid4().hex[:6]}", objective="write then ticket")
    )
    state = await wait_for(run, lambda s: len(s.effects.stack.items) == 2 and all(e.status.value == "done" for e in s.effects.stack.items))
    ticket = state.effects.stack.items[1].undo_description
    outcome = await run.rollback(TO_START, then="stop")
    assert outcome.complete, outcome.summary()
    events = (await run.history()).events
    summaries = [
        json.loads(e.user_metadata.summary.data)
        for e in events
        if e.activity_task_scheduled_event_attributes.activity_type.name.startswith("undo.")
    ]
    assert summaries == [f"undo step 2: create_ticket: {ticket}", "undo step 1: write_file: delete src/app.py"]
    assert ticket.startswith("delete ticket #")


async def _having(run, text: str) -> str | None:
    details = await run.current_details()
    return details if text in details else None
