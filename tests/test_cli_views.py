"""What `ratchet rollback`, `result` and `watch` show (issue 38): a session's dry run names the turns
it would remove, `--then` on a closed run is refused, `result` says what a waiting run waits for and
shows a typed output, `watch` separates a failed attempt from the next; as subprocesses."""

from __future__ import annotations

import pytest

from tests.runs import call, ratchet, scripted, start, wait_for
from tests.test_sessions import awaiting, session

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
    assert len((await run.state()).turns) == 3, "a dry run changes nothing"
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
