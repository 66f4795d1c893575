"""`ratchet console`'s app in-process (httpx over ASGI), on the dev server with a real worker: the
pages, an approval sent as a form, the guard (Host, Origin, CSRF, media type) and the error pages.
The same in a real browser: tests/surfaces/test_console_browser.py (`make test-browser`)."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import subprocess
import sys
import uuid
from datetime import timedelta
from urllib.parse import quote

import httpx2 as httpx
import pytest
from pydantic import SecretStr
from temporalio.client import Client

from ratchet.client import RatchetClient
from ratchet.console.app import build_app
from ratchet.contracts import Phase
from ratchet.ops.http_guard import HttpGuard
from ratchet.ops.settings import Settings, SettingsError, load_settings
from ratchet.payloads.converter import data_converter
from ratchet.worker.main import build_worker
from tests.ops_workers import ROOT
from tests.runs import call, scripted, until, wait_for

ORIGIN = "http://127.0.0.1"


def ops_run(title: str) -> dict:
    script = [{"tool_calls": [call("create_ticket", title=title)]}, {"content": "opened"}]
    return {"agent": "ops", "objective": f"open {title}", "model": {"provider": "scripted", "options": {"script": script}}}


@pytest.fixture
async def console(client, settings):
    app = build_app(RatchetClient(client, settings), HttpGuard.for_server("127.0.0.1", same_origin=True))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=ORIGIN, timeout=60) as http:
        yield http


def csrf_of(page: str) -> str:
    return re.search(r'name=csrf value="([0-9a-f]+)"', page).group(1)


async def test_an_approval_from_the_inbox_form_lets_the_run_finish(client, settings, worker, console):
    rc = RatchetClient(client, settings)
    run = await rc.start(ops_run("prod console"), f"console-{uuid.uuid4().hex[:6]}")
    state = await wait_for(run, lambda s: s.calls.pending_approvals)
    call_id = state.calls.pending_approvals[0].call_id

    async def listed():  # visibility follows the run's search attributes a moment later
        page = await console.get("/inbox")
        return page if page.status_code == 200 and call_id in page.text else None

    inbox = await until(listed, "the waiting call in the inbox")
    assert run.workflow_id in inbox.text and re.search(r"<title>Inbox \(\d+\)", inbox.text)
    assert inbox.headers["content-security-policy"].startswith("default-src 'self'; frame-ancestors 'none'")
    assert inbox.headers["x-content-type-options"] == "nosniff" and inbox.headers["referrer-policy"] == "same-origin"
    assert "<script>" not in inbox.text
    form = {"csrf": csrf_of(inbox.text), "call_id": call_id, "back": "/inbox"}
    # forged: no token, a foreign origin, text/plain, another Host
    assert (await console.post(f"/runs/{run.workflow_id}/approve", data={"call_id": call_id})).status_code == 403
    foreign = await console.post(f"/runs/{run.workflow_id}/approve", data=form, headers={"Origin": "http://evil.example"})
    assert foreign.status_code == 403
    plain = await console.post(
        f"/runs/{run.workflow_id}/approve", content=f"csrf={form['csrf']}", headers={"Content-Type": "text/plain"}
    )
    assert plain.status_code == 415
    rebound = await console.get("/", headers={"Host": "evil.example"})
    assert rebound.status_code == 421
    assert (await run.state()).calls.pending_approvals  # nothing forged got through
    done = await console.post(f"/runs/{run.workflow_id}/approve", data=form, headers={"Origin": ORIGIN})
    assert done.status_code == 303 and done.headers["location"].startswith("/inbox?note=Approved")
    assert (await run.result()).phase == Phase.DONE
    again = await console.post(f"/runs/{run.workflow_id}/approve", data=form, headers={"Origin": ORIGIN})
    shown = await console.get(again.headers["location"])
    assert "was already decided: approved by" in shown.text or "closed" in shown.text
    page = await console.get(f"/runs/{run.workflow_id}")
    assert page.status_code == 200 and "DONE" in page.text and "create_ticket" in page.text


async def test_bad_input_gets_a_page_not_a_trace(client, settings, worker, console):
    missing = await console.get(f"/runs/no-such-{uuid.uuid4().hex[:6]}")
    assert missing.status_code == 404 and "run not found" in missing.text and "Traceback" not in missing.text
    run = await RatchetClient(client, settings).start(scripted("probe", [{"content": "done"}]))
    await run.result()
    nope = await console.get(f"/runs/{run.workflow_id}/checkpoints/cp-9/rollback")
    assert nope.status_code == 409 and "no checkpoint &#x27;cp-9&#x27;" in nope.text
    bad_phase = await console.get("/?phase=SLEEPING")
    assert bad_phase.status_code == 400 and "not a phase" in bad_phase.text
    page = await console.get("/start")
    started = await console.post("/start", data={"csrf": csrf_of(page.text), "agent": "x y", "objective": "", "max_steps": "z"})
    assert started.status_code == 400 and "budget.max_steps: must be a whole number" in started.text
    unknown = await console.get("/nowhere")
    assert unknown.status_code == 404 and "There is no page /nowhere" in unknown.text


async def test_the_runs_page_filters_and_pages(client, settings, worker, console):
    rc = RatchetClient(client, settings)
    agent_runs = [await rc.start(scripted("probe", [{"content": "done"}])) for _ in range(3)]
    for run in agent_runs:
        await run.result()
    ours = {run.workflow_id for run in agent_runs}

    async def closed():  # visibility records a close a moment after it; a close between two pages reorders them
        page = await rc.list_page(agent="probe", page_size=100, running=True)
        return not ours & {r.workflow_id for r in page.runs} or None

    await until(closed, "the runs closed in visibility")
    first = await rc.list_page(agent="probe", page_size=2, running=None)
    assert len(first.runs) == 2 and first.next_page
    second = await rc.list_page(agent="probe", page_size=2, page=first.next_page)
    assert {r.workflow_id for r in second.runs}.isdisjoint({r.workflow_id for r in first.runs})
    page = await console.get("/?agent=probe")
    assert page.status_code == 200 and agent_runs[-1].workflow_id in page.text
    assert "localhost:8233/namespaces/default/workflows/" in page.text


async def test_a_console_with_a_token_asks_for_it_and_its_sign_in_sets_a_cookie(client, settings):
    guard = HttpGuard.for_server("0.0.0.0", token="s3cret-console", same_origin=True)
    app = build_app(RatchetClient(client, settings), guard)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=ORIGIN, timeout=30) as http:
        refused = await http.get("/")
        assert refused.status_code == 401 and "sign in at /login" in refused.text and "s3cret" not in refused.text
        login = await http.get("/login")
        assert login.status_code == 200
        wrong = await http.post("/login", data={"csrf": csrf_of(login.text), "token": "guess"})
        assert wrong.status_code == 401 and "not the console&#x27;s token" in wrong.text
        right = await http.post("/login", data={"csrf": csrf_of(login.text), "token": "s3cret-console"})
        assert right.status_code == 303
        assert (await http.get("/")).status_code == 200
        assert (await http.get("/", headers={"Authorization": "Bearer s3cret-console"})).status_code == 200


def test_the_console_refuses_to_bind_beyond_loopback_without_a_token():
    env = {k: v for k, v in os.environ.items() if k not in ("RATCHET_SERVE_TOKEN", "RATCHET_CONSOLE_TOKEN")}
    done = subprocess.run(
        [sys.executable, "-m", "ratchet.cli.main", "console", "--host", "0.0.0.0", "--port", "0"],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 2 and "set RATCHET_CONSOLE_TOKEN" in done.stdout, done.stdout + done.stderr


async def test_start_from_the_form_then_fork_from_a_checkpoint(client, settings, worker, console):
    script = [{"tool_calls": [call("write_file", path="a.txt", content="v1\n")]}, {"content": "wrote it"}]
    form = await console.get("/start")
    extra = json.dumps({"model": {"provider": "scripted", "options": {"script": script}}})
    wid = f"console-start-{uuid.uuid4().hex[:6]}"
    started = await console.post(
        "/start",
        data={"csrf": csrf_of(form.text), "agent": "saga", "objective": "write a.txt", "workspace": wid,
              "max_steps": "5", "workflow_id": wid, "extra": extra},
    )
    assert started.status_code == 303 and started.headers["location"].startswith(f"/runs/{wid}?note=Started")
    run = RatchetClient(client, settings).get(wid)
    result = await run.result()
    assert result.phase == Phase.DONE and (await run.state()).run.budget.max_steps == 5
    page = await console.get(f"/runs/{wid}")
    assert "+v1" in page.text and "Fork from here" in page.text
    forked = await console.post(
        f"/runs/{wid}/checkpoints/cp-1/fork", data={"csrf": csrf_of(page.text), "objective": "again"}
    )
    assert forked.status_code == 303 and f"/runs/{wid}-fork-" in forked.headers["location"]
    twin = RatchetClient(client, settings).get(forked.headers["location"].split("/runs/")[1].split("?")[0])
    assert (await twin.state()).run.resume_from.checkpoint_id == "cp-1"
    await twin.result()


async def test_an_approval_decided_by_someone_else_says_who_and_when(client, settings, worker, console):
    rc = RatchetClient(client, settings)
    run = await rc.start(ops_run("prod decided elsewhere"), f"console-{uuid.uuid4().hex[:6]}")
    state = await wait_for(run, lambda s: s.calls.pending_approvals)
    call_id = state.calls.pending_approvals[0].call_id
    page = await console.get(f"/runs/{run.workflow_id}")
    assert f'data-call="{call_id}"' in page.text  # the page offers the approval...
    await run.approve(call_id, by="alice")  # ...which someone else gives meanwhile
    form = {"csrf": csrf_of(page.text), "call_id": call_id}
    late = await console.post(f"/runs/{run.workflow_id}/reject", data={**form, "reason": "too late"})
    shown = await console.get(late.headers["location"])
    when = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \(\d+ s ago\)"
    assert re.search(f"{call_id} was already decided: approved by alice at {when}", shown.text), shown.text
    decided = (await run.state()).calls.decisions[call_id]
    assert decided.by == "alice" and decided.at
    assert (await run.result()).phase == Phase.DONE


async def test_an_approval_sent_after_the_run_closed_says_it_closed_while_the_page_was_open(
    client, settings, worker, console
):
    rc = RatchetClient(client, settings)
    run = await rc.start(ops_run("prod closed meanwhile"), f"console-{uuid.uuid4().hex[:6]}")
    state = await wait_for(run, lambda s: s.calls.pending_approvals)
    call_id = state.calls.pending_approvals[0].call_id
    page = await console.get(f"/runs/{run.workflow_id}")
    assert f'data-call="{call_id}"' in page.text
    await run.cancel()  # someone cancels the run while the page is open

    async def closed() -> bool:
        return not await run.running()

    await until(closed, "the run closed")
    late = await console.post(f"/runs/{run.workflow_id}/approve", data={"csrf": csrf_of(page.text), "call_id": call_id})
    shown = await console.get(late.headers["location"])
    assert re.search(r"The run closed \(\w+\) while the page was open: approve was not done", shown.text), shown.text
    assert "Traceback" not in shown.text


async def test_the_runs_page_filters_sessions_and_shows_step_turn_and_budget(client, settings, worker, console):
    rc = RatchetClient(client, settings)
    session = await rc.start(scripted("probe", [{"content": "hello"}, {"content": "again"}], session={}))
    plain = await rc.start(scripted("probe", [{"tool_calls": [call("probe_echo", text="x")]}, {"content": "done"}]))
    assert (await plain.result()).phase == Phase.DONE
    await wait_for(session, lambda s: s.phase == Phase.AWAITING_MESSAGE)

    def row(page: str, workflow_id: str) -> str | None:
        found = re.search(rf"<tr><td><a href=\"/runs/{workflow_id}\">.*?</tr>", page)
        return found.group(0) if found else None

    async def listed(query: str, workflow_id: str):
        page = await console.get(f"/?agent=probe&{query}")
        return page.text if row(page.text, workflow_id) else None

    sessions = await until(lambda: listed("session=yes", session.workflow_id), "the session listed as one")
    assert row(sessions, plain.workflow_id) is None
    cells = re.findall(r"<td>(.*?)</td>", row(sessions, session.workflow_id))
    assert "session" in cells[1] and cells[2] == "AWAITING_MESSAGE" and cells[4:8] == ["-", "1", "1", "$0.0000"]
    async def closed(query: str, workflow_id: str):  # visibility records the close after the result
        page = await listed(query, workflow_id)
        return page if page is not None and "<td>COMPLETED</td>" in (row(page, workflow_id) or "") else None

    others = await until(lambda: closed("session=no", plain.workflow_id), "the plain run listed, closed, not a session")
    assert row(others, session.workflow_id) is None
    cells = re.findall(r"<td>(.*?)</td>", row(others, plain.workflow_id))  # a closed run: its search attributes
    assert cells[3] == "COMPLETED" and cells[4:8] == ["-", "2", "-", "$0.0000"]
    assert (await console.get("/?session=maybe")).status_code == 400
    busy = await rc.start(
        scripted("saga", [{"tool_calls": [call("probe_wait", seconds=60)]}], workspace="busy", tenant="acme", priority=2)
    )
    await wait_for(busy, lambda s: s.phase == Phase.ACTING)

    async def busy_row():
        page = await console.get("/?agent=saga&session=no")
        return row(page.text, busy.workflow_id)

    cells = re.findall(r"<td>(.*?)</td>", await until(busy_row, "the busy run listed"))
    assert cells[2] == "RUNNING" and cells[4:8] == ["acme <small>p2</small>", "1", "-", "$0.0000"]  # thinking or acting: from its state
    await busy.cancel()
    await session.close()


async def test_a_console_without_the_codec_keys_says_so_instead_of_failing(dev_server, settings):
    keys = SecretStr(f"k1:{base64.b64encode(os.urandom(32)).decode()}")
    keyed = settings.model_copy(update={"codec_keys": keys, "task_queue": f"{settings.task_queue}-enc"})
    enc_client = await Client.connect(dev_server.address, data_converter=data_converter(keyed))
    keyless = await Client.connect(dev_server.address, data_converter=data_converter(settings))
    app = build_app(RatchetClient(keyless, settings), HttpGuard.for_server("127.0.0.1", same_origin=True))
    async with build_worker(enc_client, keyed), httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url=ORIGIN, timeout=60
    ) as console:
        run = await RatchetClient(enc_client, keyed).start(ops_run("prod sealed"), f"sealed-{uuid.uuid4().hex[:6]}")
        call_id = (await wait_for(run, lambda s: s.calls.pending_approvals)).calls.pending_approvals[0].call_id

        async def listed():
            page = await console.get("/?agent=ops&awaiting=approval")
            return page if run.workflow_id in page.text else None

        runs_page = await until(listed, "the encrypted run in the runs list")
        assert runs_page.status_code == 200  # its row from visibility; its step a dash
        page = await console.get(f"/runs/{run.workflow_id}")
        assert page.status_code == 200 and "Traceback" not in page.text
        assert "RATCHET_CODEC_KEYS is not set here" in page.text and "AWAITING_APPROVAL" in page.text
        inbox = await console.get("/inbox")
        assert inbox.status_code == 200 and f"{run.workflow_id}: payloads are encrypted" in inbox.text
        await run.approve(call_id)
        assert (await run.result()).phase == Phase.DONE


async def test_a_closed_runs_page_is_read_once_then_served_with_no_worker_up(client, settings, console):
    wid = f"console-closed-{uuid.uuid4().hex[:6]}"
    script = [{"tool_calls": [call("write_file", path="a.txt", content="v1\n")]}, {"content": "wrote it"}]
    async with build_worker(client, settings, graceful_shutdown_timeout=timedelta(0)):
        run = await RatchetClient(client, settings).start(scripted("saga", script, workspace=wid), wid)
        assert (await run.result()).phase == Phase.DONE
        first = await console.get(f"/runs/{wid}")
        assert first.status_code == 200 and "+v1" in first.text and "This run has closed" in first.text
    # no worker polls the run's queue now: a state query would wait for one; the page does not
    again = await asyncio.wait_for(console.get(f"/runs/{wid}?offset=2"), 10)
    assert again.status_code == 200 and "+v1" in again.text and "wrote it" in again.text


async def test_the_temporal_link_goes_to_the_web_ui_of_the_settings(client, settings, worker, console, monkeypatch):
    run = await RatchetClient(client, settings).start(scripted("probe", [{"content": "done"}]))
    await run.result()
    quoted = quote(run.workflow_id, safe="")
    page = await console.get(f"/runs/{run.workflow_id}")  # unset: the dev server's UI, the client's namespace
    assert f'href="http://localhost:8233/namespaces/{client.namespace}/workflows/{quoted}"' in page.text
    monkeypatch.setenv("RATCHET_TEMPORAL_UI_URL", "http://localhost:8080/namespaces/prod/")  # compose's UI
    configured = Settings(temporal_address=settings.temporal_address, task_queue=settings.task_queue)
    app = build_app(RatchetClient(client, configured), HttpGuard.for_server("127.0.0.1", same_origin=True))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=ORIGIN, timeout=60) as other:
        page = await other.get(f"/runs/{run.workflow_id}")
    assert page.status_code == 200 and f'href="http://localhost:8080/namespaces/prod/workflows/{quoted}"' in page.text
    monkeypatch.setenv("RATCHET_TEMPORAL_UI_URL", "javascript:alert(1)")
    with pytest.raises(SettingsError, match="RATCHET_TEMPORAL_UI_URL: .*http:// or https://"):
        load_settings()


async def test_a_checkpoint_no_test_verified_is_shown_unverified_not_failed(client, settings, worker, console):
    """The coder's `python -m unittest` in a workspace without tests ran none: evidence of nothing."""
    wid = f"console-bare-{uuid.uuid4().hex[:6]}"
    (settings.workspace_root / wid).mkdir(parents=True)
    script = [{"tool_calls": [call("write_file", path="hello.txt", content="hi\n")]}, {"content": "wrote it"}]
    run = await RatchetClient(client, settings).start(scripted("coder", script, workspace=wid), wid)
    assert (await run.result()).phase == Phase.DONE
    page = await console.get(f"/runs/{wid}")
    assert "unverified: no test ran" in page.text and "failed:" not in page.text, page.text


async def test_a_shadow_batch_has_a_page(client, settings, worker, console):
    script = [{"tool_calls": [call("write_file", path="a.txt", content="v1\n"), call("create_ticket", title="t")]},
              {"content": "done"}]
    original = await RatchetClient(client, settings).start(scripted("saga", script))
    assert (await original.result()).phase == Phase.DONE
    from ratchet.client.shadows import Candidate

    shadows = RatchetClient(client, settings).shadows
    batch = await shadows.start([original.workflow_id], Candidate(model="recorded"))
    await shadows.report(batch, wait_s=60)  # once closed
    shown = await console.get(f"/shadows/{batch.id}")
    assert shown.status_code == 200 and f"Shadow batch {batch.id}" in shown.text, shown.text
    assert ": same</h2>" in shown.text and "recorded: step 1 <code>create_ticket</code>" in shown.text, shown.text
    missing = await console.get("/shadows/nosuchbatch")
    assert missing.status_code == 400 and "no shadow run of batch" in missing.text
