"""Schedules (issue #43, item 1): runs and session messages started by time on Temporal Schedules,
through `RatchetClient.schedules` (dev server, scripted model). The firings are triggered or
backfilled, never waited for on the clock."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from ratchet.client import InvalidInput
from ratchet.contracts import Phase
from ratchet.contracts.schedules import ScheduleRequest
from tests.runs import ratchet, runs, scripted, start, temporal_cli, until, wait_for


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


async def test_a_scheduled_run_is_an_ordinary_run_named_after_its_schedule(client, settings, worker):
    schedules = runs(client, settings).schedules
    run = scripted("ops", [{"content": "triaged"}], objective="triage new issues")
    created = await schedules.create(ScheduleRequest(name=name("triage"), cron="0 7 * * 1-5", run=run, paused=True))
    assert created.paused and created.when == "cron 0 7 * * 1-5" and created.target == "ops: triage new issues"
    assert created.next_runs and all(t.hour == 7 and t.weekday() < 5 for t in created.next_runs)

    await schedules.trigger(created.name)  # paused: only what is triggered fires
    info = await until(lambda: _finished(schedules, created.name, 1), "the triggered run listed DONE")
    [fired] = info.recent
    assert fired.workflow_id.startswith(f"{created.name}-") and fired.phase == Phase.DONE
    result = await runs(client, settings).get(fired.workflow_id).result()
    assert result.phase == Phase.DONE and result.answer == "triaged"

    resumed = await schedules.resume(created.name)
    assert not resumed.paused
    assert [s.name for s in await schedules.list() if s.name == created.name] == [created.name]
    await schedules.delete(created.name)
    assert created.name not in [s.name for s in await schedules.list()]


async def test_a_backfill_starts_one_run_per_missed_time(client, settings, worker):
    schedules = runs(client, settings).schedules
    run = scripted("ops", [{"content": "done"}])
    created = await schedules.create(
        ScheduleRequest(name=name("hourly"), every_s=3600, run=run, paused=True, overlap="allow_all")
    )
    end = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    await schedules.backfill(created.name, end - timedelta(hours=3), end - timedelta(minutes=1))  # 3 whole hours
    info = await until(lambda: _finished(schedules, created.name, 3), "three backfilled runs DONE")
    assert len({r.workflow_id for r in info.recent}) == 3 and info.fired == 3
    await schedules.delete(created.name)


async def test_a_schedule_feeds_a_session_one_message_per_firing(client, settings, worker):
    script = [{"content": "morning one"}, {"content": "good morning answered"}]
    session = await start(client, settings, scripted("chatter", script, objective="hello"))
    await wait_for(session, lambda s: s.phase == Phase.AWAITING_MESSAGE)
    schedules = runs(client, settings).schedules
    created = await schedules.create(
        ScheduleRequest(
            name=name("morning"), cron="0 8 * * *", session_id=session.workflow_id, text="good morning", paused=True
        )
    )
    assert created.target == f"session {session.workflow_id}: good morning"
    await schedules.trigger(created.name)
    state = await wait_for(session, lambda s: len(s.session.turns.items) == 2 and s.phase == Phase.AWAITING_MESSAGE)
    turn = state.session.turns.items[1]
    assert turn.question == "good morning" and turn.answer == "good morning answered"
    info = await until(lambda: _finished(schedules, created.name, 1), "the delivery finished")
    assert info.recent[0].status == "COMPLETED"
    await schedules.delete(created.name)
    await session.close()


async def test_bad_schedules_are_refused_naming_the_field_and_nothing_is_created(client, settings, worker):
    schedules = runs(client, settings).schedules
    run = scripted("ops", [{"content": "x"}])
    bad = [
        ({"name": name("cron"), "cron": "not a cron", "run": run}, "cron"),
        ({"name": name("both"), "cron": "0 7 * * *", "every_s": 60, "run": run}, "one of cron or every_s"),
        ({"name": name("none"), "every_s": 60}, "one of run or session_id"),
        ({"name": name("agent"), "every_s": 60, "run": {"objective": "no agent"}}, "run.agent"),
        (
            {"name": name("sess"), "every_s": 60, "session_id": "no-such-session", "text": "hi"},
            "no run 'no-such-session'",
        ),
        ({"name": "bad name!", "every_s": 60, "run": run}, "name"),
    ]
    for request, says in bad:
        with pytest.raises(InvalidInput) as refused:
            await schedules.create(request)
        assert says in str(refused.value), (request, str(refused.value))
    listed = {s.name for s in await schedules.list()}
    assert not listed & {request["name"] for request, _ in bad}

    one_shot = await start(client, settings, scripted("ops", [{"content": "x"}]))
    await one_shot.result()
    with pytest.raises(InvalidInput, match="is not a session"):
        await schedules.create(
            {"name": name("notsess"), "every_s": 60, "session_id": one_shot.workflow_id, "text": "hi"}
        )
    taken = await schedules.create({"name": name("taken"), "every_s": 60, "run": run, "paused": True})
    with pytest.raises(InvalidInput, match="exists"):
        await schedules.create({"name": taken.name, "every_s": 60, "run": run})
    await schedules.delete(taken.name)


async def test_the_temporal_cli_sees_a_ratchet_schedule(client, settings, worker):
    schedules = runs(client, settings).schedules
    created = await schedules.create(
        {"name": name("cli"), "every_s": 3600, "run": scripted("ops", [{"content": "x"}]), "paused": True}
    )
    code, out = await temporal_cli(
        settings.temporal_address, "schedule", "describe", "--schedule-id", created.name, "-o", "json"
    )
    assert code == 0, out
    described = json.loads(out)
    assert described["schedule"]["action"]["startWorkflow"]["workflowType"]["name"] == "AgentWorkflow"
    await schedules.delete(created.name)


async def _finished(schedules, schedule: str, count: int):
    info = await schedules.describe(schedule)
    done = [r for r in info.recent if r.status in ("COMPLETED", "FAILED")]
    return info if len(done) >= count else None


async def test_the_schedule_verbs(client, settings, worker, tmp_path):
    """`ratchet schedule` end to end: create (AGENT OBJECTIVE and --file), list, trigger, show, pause,
    delete; a bad cron line exits 2 naming it, nothing created."""
    triage = name("cli-triage")
    code, out = await ratchet(
        settings, "schedule", "create", triage, "--cron", "0 7 * * 1-5", "--paused", "ops", "triage new issues"
    )
    assert code == 0 and f"schedule {triage} created: cron 0 7 * * 1-5 -> ops: triage new issues (paused)" in out, out
    run_file = tmp_path / "run.json"
    run_file.write_text(json.dumps(scripted("ops", [{"content": "filed"}], objective="from a file")))
    filed = name("cli-file")
    code, out = await ratchet(
        settings, "schedule", "create", filed, "--every", "1h", "--paused", "--file", str(run_file)
    )
    assert code == 0, out
    code, out = await ratchet(settings, "schedule", "trigger", filed)
    assert code == 0, out
    await until(lambda: _finished(runs(client, settings).schedules, filed, 1), "the triggered run finished")
    code, out = await ratchet(settings, "schedule", "list")
    line = next(line for line in out.splitlines() if line.startswith(filed))
    assert code == 0 and "every 3600s" in line and "paused" in line and "DONE" in line and "ops: from a file" in line, (
        out
    )
    code, out = await ratchet(settings, "schedule", "show", filed, "--json")
    assert code == 0 and json.loads(out)["recent"][0]["phase"] == "DONE", out
    code, out = await ratchet(settings, "schedule", "resume", triage)
    assert code == 0, out
    assert not (await runs(client, settings).schedules.describe(triage)).paused
    for schedule in (triage, filed):
        code, out = await ratchet(settings, "schedule", "delete", schedule)
        assert code == 0, out
    bad = name("cli-bad")
    code, out = await ratchet(settings, "schedule", "create", bad, "--cron", "61 * * * *", "ops", "x")
    assert code == 2 and "cron" in out, out
    code, out = await ratchet(settings, "schedule", "show", bad)
    assert code == 2 and "not found" in out, out


async def test_the_consoles_schedules_page_pauses_resumes_and_triggers(client, settings, worker):
    import httpx2 as httpx

    from ratchet.client import RatchetClient
    from ratchet.console.app import build_app
    from ratchet.ops.http_guard import HttpGuard
    from tests.surfaces.test_console import ORIGIN, csrf_of

    schedules = runs(client, settings).schedules
    created = await schedules.create(
        {"name": name("console"), "every_s": 3600, "run": scripted("ops", [{"content": "from the console"}])}
    )
    app = build_app(RatchetClient(client, settings), HttpGuard.for_server("127.0.0.1", same_origin=True))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=ORIGIN, timeout=60) as http:
        page = await http.get("/schedules")
        assert page.status_code == 200 and created.name in page.text and "every 3600s" in page.text
        for action, paused in (("pause", True), ("resume", False)):
            done = await http.post(f"/schedules/{created.name}/{action}", data={"csrf": csrf_of(page.text)})
            assert done.status_code == 303, done.text
            assert (await schedules.describe(created.name)).paused is paused
        await http.post(f"/schedules/{created.name}/trigger", data={"csrf": csrf_of(page.text)})
        info = await until(lambda: _finished(schedules, created.name, 1), "the run the console triggered finished")
        page = await http.get("/schedules")
        assert info.recent[0].workflow_id in page.text and "DONE" in page.text
        forged = await http.post(f"/schedules/{created.name}/pause", data={"csrf": "0" * 32})
        assert forged.status_code == 403 and not (await schedules.describe(created.name)).paused
        unknown = await http.post(f"/schedules/{created.name}/delete", data={"csrf": csrf_of(page.text)})
        assert unknown.status_code == 404
    await schedules.delete(created.name)
