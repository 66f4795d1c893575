"""The application's code driving an agent through `ratchet.client`: start a run of the shipped
`ops` profile, approve the production ticket it waits on, read its answer; then its own workflow
through the same Temporal client. `python -m examples.embedded.app`; prints what happened."""

from __future__ import annotations

import asyncio
import sys
import uuid

from examples.embedded.workflows import ReleaseNotes
from ratchet import RatchetClient

RUN = {
    "agent": "ops", "objective": "open a ticket for the prod deploy of v2",
    # a scripted model, so the example runs offline; drop it to let the worker's model decide
    "model": {"provider": "scripted", "options": {"script": [
        {"tool_calls": [{"name": "create_ticket", "arguments": {"title": "prod: deploy v2"}}]},
        {"content": "opened the prod deploy ticket"},
    ]}},
}


async def main() -> int:
    client = await RatchetClient.connect()
    run = await client.start(RUN, f"embedded-{uuid.uuid4().hex[:6]}")
    print(f"started {run.workflow_id}", flush=True)
    while not (state := await run.state()).calls.pending_approvals:
        await asyncio.sleep(0.2)
    waiting = state.calls.pending_approvals[0]
    print(f"waiting for approval: {waiting.tool} {waiting.arguments}", flush=True)
    print(await run.approve(waiting.call_id), flush=True)
    result = await run.result()
    print(f"{result.phase}: {result.answer}", flush=True)
    notes = await client.temporal.execute_workflow(
        ReleaseNotes.run, "v2", id=f"notes-{uuid.uuid4().hex[:6]}", task_queue=client.settings.task_queue,
    )
    print(notes, flush=True)
    return 0 if result.phase == "DONE" else 1


if __name__ == "__main__":
    from ratchet.ops.process import exit_now

    exit_now(asyncio.run(main()) if sys.argv[1:] == [] else 2)
