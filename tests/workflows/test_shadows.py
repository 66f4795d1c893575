"""Shadow runs (`RatchetClient.shadows`) on the dev server, with real files, the SQLite tracker and
the SQLite ledger: the quarantine leaves the original's world byte for byte as it was, `--model
recorded` reproduces an unchanged run exactly and a changed prompt diverges at its first call, and
bad input starts nothing."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import sqlite3
import time
import uuid
from pathlib import Path

import pytest

from ratchet.activities.tracker_tools import TrackerSettings
from ratchet.client import InvalidInput, RunNotFound
from ratchet.client.shadow_report import broken, markdown, parse_fail_if
from ratchet.client.shadows import Candidate
from ratchet.console.shadows_view import shadows_page
from ratchet.contracts import Phase
from tests.runs import ratchet, runs, scripted, start, until, wait_for
from tests.workflows.test_rollback import ticket, write

DONE_AFTER_TWO_CHECKPOINTS = [
    {"tool_calls": [write("a.txt", "v1\n"), ticket("t1")]},
    {"tool_calls": [write("a.txt", "v2\n"), write("b.txt", "new\n"), ticket("t2")]},
    {"content": "finished"},
]


def tree_digest(root: Path) -> str:
    """The files under `root`, names and bytes, as one digest."""
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def tracker_rows() -> list[tuple]:
    with sqlite3.connect(TrackerSettings().path) as conn:
        return conn.execute("SELECT * FROM tickets ORDER BY id").fetchall()


def ledger_rows(path: Path, original: str) -> list[tuple]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT * FROM ledger WHERE key LIKE ? ORDER BY key", (f"{original}/%",))
        return [r for r in rows if ".shadow-" not in r[0]]


async def world(settings, original: str, workspace: str) -> tuple:
    return (
        tree_digest(settings.workspace_root / workspace),
        hashlib.sha256(TrackerSettings().path.read_bytes()).hexdigest(),
        tracker_rows(),
        ledger_rows(settings.ledger_path, original),
    )


async def test_a_recorded_shadow_reproduces_the_run_and_touches_nothing_of_its_world(client, settings, worker):
    original = await start(client, settings, scripted("saga", DONE_AFTER_TWO_CHECKPOINTS, workspace="orig"))
    assert (await original.result()).phase == Phase.DONE
    before = await world(settings, original.workflow_id, "orig")
    assert len(before[2]) == 2 and before[3], "the original created tickets and wrote ledger rows"

    shadows = runs(client, settings).shadows
    batch = await shadows.start([original.workflow_id], Candidate(model="recorded"))
    report = await shadows.report(batch, wait_s=60)

    [diff] = report.runs
    assert diff.complete and diff.shadow.phase == "DONE", diff
    assert diff.same and diff.first_divergent_call is None and not diff.answer_diff, markdown(report)
    assert (diff.shadow.steps, diff.shadow.tokens) == (diff.original.steps, diff.original.tokens)
    assert [(c.tool, c.shadow) for c in diff.quarantined] == [("create_ticket", "recorded")] * 2
    assert report.totals.same == 1 and report.totals.quarantined == 2 and report.totals.cost_ratio == 1.0
    assert await world(settings, original.workflow_id, "orig") == before, "the original's world is untouched"
    shadow_state = await runs(client, settings).get(diff.shadow.workflow_id).state()
    private = settings.workspace_root / shadow_state.plan.workspace
    assert private != settings.workspace_root / "orig" and (private / "b.txt").read_text() == "new\n"
    assert broken(report, parse_fail_if("verifier_worse>0, cost_ratio>1.2")) == []
    listed = await runs(client, settings).shadows.find(batch.id)
    assert [p.shadow for p in listed.pairs] == [diff.shadow.workflow_id]


@pytest.mark.e2e  # tens of seconds: make test-e2e
async def test_a_changed_prompt_diverges_and_unknown_calls_are_quarantined(client, settings, worker):
    original = await start(client, settings, scripted("saga", DONE_AFTER_TWO_CHECKPOINTS, workspace="orig2"))
    assert (await original.result()).phase == Phase.DONE
    before = await world(settings, original.workflow_id, "orig2")
    shadows = runs(client, settings).shadows

    changed = Candidate(model="recorded", set={"system_prompt": "You are a different agent."})
    diverged = (await shadows.report(await shadows.start([original.workflow_id], changed), wait_s=60)).runs[0]
    assert not diverged.same and diverged.diverged_at == 1 and diverged.shadow.phase == "FAILED", diverged

    # the same script (the scripted provider is keyed on the turn) under another prompt: the same calls
    batch = await shadows.start([original.workflow_id], Candidate(set={"system_prompt": "Another prompt."}))
    assert (await shadows.report(batch, wait_s=60)).totals.same == 1
    assert [c.workflow_id for c in await shadows.clean(batch)] == [batch.pairs[0].shadow]
    await until(
        lambda: gone(runs(client, settings).get(batch.pairs[0].shadow)), "the cleaned shadow deleted", timeout=120
    )  # the dev server deletes in about 40 s

    # a script that opens another ticket: the call the original never made is not executed
    other = [{"tool_calls": [write("a.txt", "v1\n"), ticket("other")]}, {"content": "done otherwise"}]
    state = await runs(client, settings).get(original.workflow_id).state()
    run = state.run.model_copy(update={"model": state.run.model.model_copy(update={"options": {"script": other}})})
    handle = await runs(client, settings).start(
        run.model_copy(update={"workspace": None, "shadow": _shadow_of(state)}), f"{original.workflow_id}.manual"
    )
    assert (await handle.result()).phase == Phase.DONE
    calls = (await handle.state()).calls.tool_calls.items
    assert [(c.tool, c.shadow, c.result.error_type) for c in calls] == [
        ("write_file", None, None),
        ("create_ticket", "quarantined", "Quarantined"),
    ]
    assert await world(settings, original.workflow_id, "orig2") == before


async def test_bisect_names_the_first_step_where_the_candidate_replies_otherwise(client, settings, worker):
    original = await start(client, settings, scripted("saga", DONE_AFTER_TWO_CHECKPOINTS, workspace="bisect"))
    assert (await original.result()).phase == Phase.DONE
    before = await world(settings, original.workflow_id, "bisect")
    shadows = runs(client, settings).shadows
    first = DONE_AFTER_TWO_CHECKPOINTS[0]
    reordered = {"tool_calls": [{"name": c["name"], "arguments": dict(reversed(c["arguments"].items()))} for c in first["tool_calls"]]}
    departing = [reordered, {"tool_calls": [write("a.txt", "v3\n")]}, {"content": "finished"}]

    def bisect(script):
        return Candidate(model="scripted:scripted", model_options={"script": script}, bisect=True)

    batch = await shadows.start([original.workflow_id], bisect(departing))
    diff = (await shadows.report(batch, wait_s=60)).runs[0]
    # step 1: the same calls, arguments in another order (canonical): the recorded reply goes on
    assert not diff.same and diff.diverged_at == 2 and diff.shadow.phase == "FAILED", diff
    assert "the candidate replied 'write_file(" in diff.departure and "v3" in diff.departure, diff.departure
    assert "where the original replied 'write_file(" in diff.departure and "v2" in diff.departure, diff.departure
    shadow_calls = (await runs(client, settings).get(batch.pairs[0].shadow).state()).calls.tool_calls.items
    assert [(c.step, c.tool, c.shadow) for c in shadow_calls] == [(1, "write_file", None), (1, "create_ticket", "recorded")]
    report = await shadows.report(batch, wait_s=60)
    assert "departs at step 2: the candidate replied" in markdown(report)
    assert "Departs from the recorded replies at step 2: the candidate replied" in shadows_page(report)

    # a candidate that replies as the original did all along: the shadow is the original again
    same = await shadows.report(await shadows.start([original.workflow_id], bisect(DONE_AFTER_TWO_CHECKPOINTS)), wait_s=60)
    assert same.totals.same == 1 and same.runs[0].departure == "", same.runs[0]
    assert await world(settings, original.workflow_id, "bisect") == before


async def gone(handle) -> bool:
    try:
        await handle.describe()
    except RunNotFound:
        return True
    return False


def _shadow_of(state):
    from ratchet.contracts import ShadowOf

    return ShadowOf(workflow_id=state.workflow_id, workspace_ref=state.workspace.snapshot)


async def test_a_shadow_from_a_checkpoint_starts_from_its_files(client, settings, worker):
    original = await start(client, settings, scripted("saga", DONE_AFTER_TWO_CHECKPOINTS, workspace="orig3"))
    assert (await original.result()).phase == Phase.DONE
    shadows = runs(client, settings).shadows
    batch = await shadows.start([original.workflow_id], Candidate(model="recorded", from_checkpoint="cp-1"))
    [diff] = (await shadows.report(batch, wait_s=60)).runs
    assert diff.same and diff.shadow.phase == "DONE" and diff.shadow.answer == "finished", diff
    assert [(c.tool, c.shadow) for c in diff.quarantined] == [("create_ticket", "recorded")]


@pytest.mark.parametrize(
    "runs_given, candidate, problem",
    [
        ('RatchetAgent="no-such-agent"', Candidate(), "selects no run"),
        (None, Candidate(from_checkpoint="cp-9"), "has no checkpoint 'cp-9'"),
        (None, Candidate(set={"system_prompt": ""}), "set system_prompt"),
        (None, Candidate(set={"colour": "blue"}), "set colour"),
        (None, Candidate(budget_usd=0), "budget_usd: must be above 0"),
        (None, Candidate(model="gpt"), "neither 'recorded' nor PROVIDER:MODEL"),
        (None, Candidate(model="recorded", bisect=True), "bisect: needs a candidate model"),
    ],
)
async def test_bad_input_starts_nothing(client, settings, worker, runs_given, candidate, problem):
    original = await start(client, settings, scripted("saga", [{"content": "ok"}]))
    assert (await original.result()).phase == Phase.DONE
    shadows = runs(client, settings).shadows
    with pytest.raises(InvalidInput) as refused:
        await shadows.start(runs_given or [original.workflow_id], candidate, batch="nothing")
    assert problem in str(refused.value)
    with pytest.raises(RunNotFound):
        await runs(client, settings).get(f"{original.workflow_id}.shadow-nothing").describe()


REFUSED_BY_THE_WORKER = [
    (Candidate(profile="no-such-profile"), "unknown profile 'no-such-profile'"),
    (Candidate(model="nosuch:model"), "unknown provider 'nosuch'"),
    (Candidate(model="scripted:scripted", bisect=True, model_options={"scrip": []}), "candidate"),
]


@pytest.mark.e2e  # tens of seconds: make test-e2e
async def test_what_only_the_worker_knows_stops_the_batch_at_its_first_shadow(client, settings, worker):
    originals = [await start(client, settings, scripted("saga", [{"content": "ok"}])) for _ in range(2)]
    for original in originals:
        assert (await original.result()).phase == Phase.DONE
    shadows = runs(client, settings).shadows
    firsts = []
    for n, (candidate, problem) in enumerate(REFUSED_BY_THE_WORKER):
        with pytest.raises(InvalidInput) as refused:
            await shadows.start([o.workflow_id for o in originals], candidate, batch=f"refused{n}")
        assert "the worker cannot run it" in str(refused.value) and problem in str(refused.value), refused.value
        with pytest.raises(RunNotFound):  # the second never started
            await runs(client, settings).get(f"{originals[1].workflow_id}.shadow-refused{n}").describe()
        firsts.append(runs(client, settings).get(f"{originals[0].workflow_id}.shadow-refused{n}"))
    await until(lambda: gone(firsts[0]), "the refused first shadow deleted", timeout=120)  # the others too, later


async def test_the_command_line_gates_on_fail_if(client, settings, worker, tmp_path):
    original = await start(client, settings, scripted("saga", DONE_AFTER_TWO_CHECKPOINTS, workspace="cli"))
    assert (await original.result()).phase == Phase.DONE
    another = {"RATCHET_ARTIFACT_DIR": str(tmp_path / "another-store")}  # not the worker's: nothing to replay
    code, out = await ratchet(settings, "shadow", "--runs", original.workflow_id, "--model", "recorded", extra_env=another)
    assert code == 2 and "its transcript is no longer stored" in out, out
    code, out = await ratchet(settings, "shadow", "--runs", original.workflow_id, extra_env=another)
    assert code == 2 and "its workspace files are no longer stored" in out, out
    shadow = ("shadow", "--runs", original.workflow_id, "--model", "recorded", "--fail-if", "same>0")
    code, out = await ratchet(settings, *shadow)
    assert code == 1 and "fail-if: same=1 > 0" in out and "| 1 | 1 | 0 |" in out, out
    batch = re.search(r"shadow batch (\w+)", out).group(1)
    code, out = await ratchet(
        settings, "shadow", "report", batch, "--json", "--fail-if", "verifier_worse>0, cost_ratio>1.2"
    )
    assert code == 0 and json.loads(out[out.index("{") :])["totals"]["same"] == 1, out
    code, out = await ratchet(settings, "shadow", "--runs", original.workflow_id, "--budget-usd", "0")
    assert code == 2 and "budget_usd: must be above 0" in out, out
    bisect = ("--model", "scripted:scripted", "--bisect", "--json")
    script = json.dumps({"script": [DONE_AFTER_TWO_CHECKPOINTS[0], {"content": "other"}]})
    code, out = await ratchet(
        settings, "shadow", "--runs", original.workflow_id, *bisect, "--model-options", script,
        extra_env={"RATCHET_ARTIFACT_DIR": str(settings.artifact_dir)},
    )
    diff = json.loads(out[out.index("{") :])["runs"][0]
    assert code == 0 and diff["diverged_at"] == 2 and "the candidate replied 'other'" in diff["departure"], out
    code, out = await ratchet(settings, "shadow", "--runs", original.workflow_id, *bisect, "--model-options", "[1]")
    assert code == 2 and "--model-options: give a JSON object" in out, out


async def test_a_shadow_of_the_coder_runs_its_verifier_on_the_private_copy(client, settings, worker):
    script = json.loads((Path(__file__).resolve().parents[2] / "examples" / "login-script.json").read_text())
    original = await start(client, settings, scripted("coder", script, workspace="login"))
    assert (await original.result()).phase == Phase.DONE
    before = tree_digest(settings.workspace_root / "login")
    shadows = runs(client, settings).shadows
    [diff] = (await shadows.report(await shadows.start([original.workflow_id], Candidate(model="recorded")), 120)).runs
    assert diff.same and diff.original.verified is True and diff.shadow.verified is True, markdown_of(diff)
    assert tree_digest(settings.workspace_root / "login") == before


def markdown_of(diff) -> str:
    from ratchet.client.shadow_report import ShadowReport, totals

    return markdown(ShadowReport(batch="-", runs=[diff], totals=totals([diff])))


async def test_twenty_runs_selected_by_a_query_shadow_at_once(client, settings, worker):
    prefix = f"many-{uuid.uuid4().hex[:6]}-"
    script = [{"tool_calls": [write("a.txt", "v1\n"), ticket("t")]}, {"content": "finished"}]
    originals = await asyncio.gather(
        *(start(client, settings, scripted("saga", script), workflow_id=f"{prefix}{i}") for i in range(20))
    )
    assert all([(await o.result()).phase == Phase.DONE for o in originals])
    shadows = runs(client, settings).shadows
    query = f'WorkflowId STARTS_WITH "{prefix}" AND ExecutionStatus="Completed"'
    await until(lambda: _listed(shadows, query, 20), "the 20 runs listed by visibility")
    began = time.monotonic()
    batch = await shadows.start(query, Candidate(model="recorded"), concurrency=4)
    report = await shadows.report(batch, wait_s=120)
    print(f"shadow_report_s_20={time.monotonic() - began:.2f}")
    assert report.totals.runs == 20 and report.totals.same == 20 and report.totals.quarantined == 20, markdown(report)


async def _listed(shadows, query: str, count: int) -> bool:
    return len(await shadows.listed(query, 100)) == count


async def test_a_session_is_shadowed_turn_by_turn_and_from_a_turn_checkpoint(client, settings, worker):
    chat = [{"content": "one"}, {"tool_calls": [write("s.txt", "x\n")]}, {"content": "two"}, {"content": "three"}]
    session = await start(client, settings, scripted("chatter", chat, objective="first question"))
    await wait_for(session, lambda s: s.phase == Phase.AWAITING_MESSAGE)
    assert (await session.ask("second question")).answer == "two"
    assert (await session.ask("third question")).answer == "three"
    await session.close()
    assert (await session.result()).phase == Phase.DONE
    shadows = runs(client, settings).shadows
    [whole] = (await shadows.report(await shadows.start([session.workflow_id], Candidate(model="recorded")), 60)).runs
    assert whole.same and whole.shadow.phase == "DONE" and whole.shadow.answer == "three", markdown_of(whole)
    later = Candidate(model="recorded", from_checkpoint="turn-1")
    [after] = (await shadows.report(await shadows.start([session.workflow_id], later), 60)).runs
    assert after.same and after.shadow.answer == "three", markdown_of(after)
    shadow_state = await runs(client, settings).get(after.shadow.workflow_id).state()
    assert [t.question for t in shadow_state.session.turns.items] == ["second question", "third question"]


async def test_a_shadow_does_not_sit_out_the_originals_waits(client, settings, worker):
    script = [{"tool_calls": [{"name": "wait", "arguments": {"seconds": 3}}]}, {"content": "waited"}]
    original = await start(client, settings, scripted("ops", script))
    assert (await original.result()).phase == Phase.DONE
    shadows = runs(client, settings).shadows
    began = time.monotonic()
    [diff] = (await shadows.report(await shadows.start([original.workflow_id], Candidate(model="recorded")), 60)).runs
    assert diff.same and [(c.tool, c.shadow) for c in diff.quarantined] == [("wait", "recorded")], markdown_of(diff)
    assert time.monotonic() - began < 3
    assert time.monotonic() - began < 3


async def test_a_candidates_temperature_beats_the_one_the_original_run_set(client, settings, worker):
    run = scripted("saga", [{"content": "done"}])
    run["model"]["temperature"] = 0
    original = await start(client, settings, run)
    assert (await original.result()).phase == Phase.DONE
    shadows = runs(client, settings).shadows
    batch = await shadows.start([original.workflow_id], Candidate(set={"temperature": 0.8}))
    await shadows.report(batch, wait_s=60)
    shadow = await shadows.get(batch.pairs[0].shadow).state()
    assert (shadow.run.model.temperature, shadow.plan.model.temperature) == (None, 0.8)
    assert (await original.state()).plan.model.temperature == 0
