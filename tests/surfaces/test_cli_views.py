"""What `ratchet rollback`, `result` and `watch` show (issue 38): a session's dry run names the turns
it would remove, `--then` on a closed run is refused, `result` says what a waiting run waits for and
shows a typed output, `watch` separates a failed attempt from the next; as subprocesses."""

from __future__ import annotations

import asyncio
import json
import os
import sys

import pytest

from tests.runs import call, ratchet, scripted, start, until, wait_for
from tests.sessions.test_sessions import awaiting, session

pytestmark = pytest.mark.e2e  # processes as a user runs them: `make test-e2e`, not `make test`

WRITE_AND_FINISH = [
    {"tool_calls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "hello"}}]},
    {"content": "wrote a.txt"},
]


async def test_a_sessions_dry_run_names_the_turns_it_would_remove(client, settings, worker):
    script = [{"content": "one"}, {"tool_calls": [call("probe_append", label="t2")]}, {"content": "two"},
              {"tool_calls": [call("probe_append", label="t3")]}, {"content": "three"}]
    run = await start(client, settings, session(script))
    await wait_for(run, awaiting)
    for turn in (2, 3):
        assert (await run.ask(f"question {turn}")).turn == turn
    code, out = await ratchet(settings, "rollback", run.workflow_id, "turn-1", "--dry-run")
    assert code == 0 and "dry run: 2 to undo, nothing changed; turns removed: 2, 3" in out, out
    assert len((await run.state()).session.turns.items) == 3, "a dry run changes nothing"
    await run.terminate("test over")


async def test_then_on_a_closed_run_is_refused_with_the_reason(client, settings, worker):
    run = await start(client, settings, scripted("probe", WRITE_AND_FINISH))
    await run.result()
    code, out = await ratchet(settings, "rollback", run.workflow_id, "start", "--then", "stop")
    assert code == 1, out
    assert out.strip() == (f"{run.workflow_id} has ended DONE (COMPLETED): its rollback only undoes its effects, "
                           "it cannot --then stop; leave --then out to roll it back"), out
    code, out = await ratchet(settings, "rollback", run.workflow_id, "start", "--dry-run")
    assert code == 0 and f"{run.workflow_id} has ended DONE (COMPLETED); rollback workflow" in out, out


async def test_result_of_a_waiting_run_says_what_it_waits_for(client, settings, worker):
    tickets = [{"tool_calls": [call("create_ticket", title="prod: restart api")]}, {"content": "done"}]
    run = await start(client, settings, scripted("approver", tickets))
    state = await wait_for(run, lambda s: s.calls.pending_approvals)
    waiting = state.calls.pending_approvals[0].call_id
    await until(lambda: run_phase(run, "AWAITING_APPROVAL"), "the phase in visibility")
    code, out = await ratchet(settings, "result", run.workflow_id, "--no-wait")
    assert code == 3 and f"{run.workflow_id}: still running (AWAITING_APPROVAL):" in out, out
    assert f"`ratchet approve {run.workflow_id} {waiting}`" in out, out

    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "ratchet.cli.main", "result", run.workflow_id,
        env=dict(os.environ, TEMPORAL_ADDRESS=settings.temporal_address, RATCHET_TASK_QUEUE=settings.task_queue),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    said = await asyncio.wait_for(proc.stderr.readline(), 30)  # before the run ends: it blocks after it
    assert said.decode().startswith(f"# {run.workflow_id} is running (AWAITING_APPROVAL):"), said
    await run.approve(waiting)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0 and json.loads(out)["answer"] == "done", (out, err)
    assert "output" not in json.loads(out), "no output schema, no output"


async def run_phase(run, phase: str) -> bool:
    return (await run.summary()).phase == phase


async def test_result_shows_a_typed_output_and_watch_keeps_a_sent_back_answer_apart(
    client, settings, worker, openai_server, openai_key
):
    schema = {"type": "object", "properties": {"verdict": {"type": "string", "enum": ["pass", "fail"]}},
              "required": ["verdict"], "additionalProperties": False}
    openai_server.set_script([{"content": '{"verdict": "maybe"}'}, {"content": '{"verdict": "pass"}'}], key=openai_key)
    run = await start(client, settings, {"agent": "probe", "objective": "judge", "output_schema": schema})
    assert (await run.result()).output == {"verdict": "pass"}

    code, out = await ratchet(settings, "result", run.workflow_id)
    assert code == 0 and json.loads(out)["output"] == {"verdict": "pass"}, out

    code, out = await ratchet(settings, "watch", run.workflow_id)
    assert code == 0, out
    assert '{"verdict": "maybe"}\n\n{"verdict": "pass"}' in out, out
    assert "recovered from: the final answer does not match the output schema" in out, out
