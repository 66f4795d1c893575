"""`ratchet start | list | result | cancel | transcript` as subprocesses against the dev server."""

from __future__ import annotations

import json

import pytest

from ratchet.client import RunCancelled
from tests.runs import ratchet, runs, scripted, until

pytestmark = pytest.mark.e2e  # processes as a user runs them: `make test-e2e`, not `make test`

WRITE_AND_FINISH = [
    {"tool_calls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "hello"}}]},
    {"content": "wrote a.txt"},
]


async def test_start_follow_list_result_and_transcript(client, settings, worker, tmp_path):
    run_file = tmp_path / "run.json"
    run_file.write_text(json.dumps(scripted("probe", WRITE_AND_FINISH, objective="overridden below")))
    code, out = await ratchet(settings, "start", "--file", str(run_file), "--id", "cli-basics-1",
                              "--follow", "probe", "write a.txt")
    assert code == 0, out
    # the answer is shown as the model writes it (the run's stream), once
    assert "started cli-basics-1" in out and "[DONE]" in out and out.count("\nwrote a.txt\n") == 1, out
    state = await runs(client, settings).get("cli-basics-1").state()
    assert state.run.objective == "write a.txt", "command-line OBJECTIVE overrides the file's"

    code, out = await ratchet(settings, "result", "cli-basics-1")
    assert code == 0 and json.loads(out)["answer"] == "wrote a.txt", out

    code, out = await ratchet(settings, "transcript", "cli-basics-1", "--offset", "1", "--limit", "2")
    lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert code == 0 and [m["index"] for m in lines] == [1, 2], out
    assert lines[0]["role"] == "user" and lines[0]["content"].startswith("write a.txt")
    assert lines[1]["tool_calls"][0]["name"] == "write_file"

    async def listed() -> tuple[int, str] | None:  # visibility is eventually consistent
        code, out = await ratchet(settings, "list", "--agent", "probe", "--phase", "DONE")
        return (code, out) if "cli-basics-1" in out else None

    code, out = await until(listed, "cli-basics-1 in `ratchet list`")
    assert code == 0 and "COMPLETED" in out, out


async def test_cancel_ends_a_waiting_run_and_result_says_so(client, settings, worker):
    script = [{"tool_calls": [{"name": "probe_wait", "arguments": {"seconds": 60}}]}, {"content": "never"}]
    code, out = await ratchet(settings, "start", "probe", "wait a minute", "--id", "cli-basics-2",
                              "--file", "/dev/null")
    assert code == 2 and "ratchet start: cannot read /dev/null" in out, out

    handle = await runs(client, settings).start(scripted("saga", script), "cli-basics-2")
    code, out = await ratchet(settings, "result", "cli-basics-2", "--no-wait")
    assert code == 3 and "still running" in out, out
    code, out = await ratchet(settings, "cancel", "cli-basics-2")
    assert code == 0, out
    with pytest.raises(RunCancelled):  # cancel ends the run
        await handle.result()
    code, out = await ratchet(settings, "result", "cli-basics-2")
    assert code == 1, out


async def test_start_rejects_an_invalid_run_before_contacting_temporal(settings):
    code, out = await ratchet(settings, "start", "no such agent!", "x")
    assert code == 2 and "ratchet start: invalid run: agent" in out, out
    code, out = await ratchet(settings, "result", "no-such-run-anywhere")
    assert code == 2 and "not found" in out.lower(), out


async def test_ratchet_cost_prints_what_a_run_was_billed_as_a_table_and_json(client, settings, worker):
    handle = await runs(client, settings).start(scripted("probe", WRITE_AND_FINISH), "cli-cost-1")
    await handle.result()
    ledger = {"RATCHET_LEDGER_PATH": str(settings.ledger_path)}  # the billing ledger is in the ledger's database
    code, out = await ratchet(settings, "cost", "cli-cost-1", "--json", extra_env=ledger)
    report = json.loads(out)
    assert code == 0 and report["total"]["attempts"] == 2, out
    assert [(line["step"], line["cause"], line["model"]) for line in report["lines"]] == [
        (1, "answer", "scripted"), (2, "answer", "scripted")]
    code, out = await ratchet(settings, "cost", "cli-cost-1", extra_env=ledger)
    lines = out.splitlines()
    assert code == 0 and lines[0].split()[:3] == ["step", "cause", "model"], out
    assert lines[-1].split()[:2] == ["total", "2"] and lines[-1].endswith("0.000000"), out
    code, out = await ratchet(settings, "cost", "no-such-run-9", extra_env=ledger)
    assert code != 0 and "no-such-run-9" in out, out
