"""The console's side of a handoff to a person (issue #43, item 5): the page of runs handed to
people finds the run through RatchetHandedTo, shows its record, and its form hands the run back to
a profile; the run's page shows every handoff record (dev server, scripted model, `asker`)."""

from __future__ import annotations

import re

import httpx2 as httpx
import pytest

from ratchet.client import RatchetClient
from ratchet.console.app import build_app
from ratchet.contracts import Phase
from ratchet.ops.http_guard import HttpGuard
from tests.runs import call, scripted, start, until, wait_for

ORIGIN = "http://127.0.0.1"


@pytest.fixture
async def console(client, settings):
    app = build_app(RatchetClient(client, settings), HttpGuard.for_server("127.0.0.1", same_origin=True))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=ORIGIN, timeout=60) as http:
        yield http


async def test_a_run_handed_to_a_person_is_answered_from_the_console(client, settings, worker, console):
    script = [
        {"tool_calls": [call("handoff", to="person:alice", summary="which release?", open_questions=["4.2 or 5.0?"])]},
        {"tool_calls": [call("write_file", path="notes.txt", content="5.0\n")]},
        {"content": "released 5.0"},
    ]
    run = await start(client, settings, scripted("asker", script))
    await wait_for(run, lambda s: s.phase == Phase.AWAITING_PERSON)

    async def listed():  # visibility follows the run's search attributes a moment later
        page = await console.get("/handoffs?person=alice")
        return page if page.status_code == 200 and run.workflow_id in page.text else None

    page = await until(listed, "the run on alice's handoffs page")
    assert "which release?" in page.text and "open question:</b> 4.2 or 5.0?" in page.text
    assert run.workflow_id not in (await console.get("/handoffs?person=bob")).text
    bad = await console.get("/handoffs?person=a%20b")
    assert bad.status_code == 400 and "person: letters, digits" in bad.text
    run_page = await console.get(f"/runs/{run.workflow_id}")
    assert "<h2>Handoffs</h2>" in run_page.text and "asker → person:alice" in run_page.text
    csrf = re.search(r'name=csrf value="([0-9a-f]+)"', page.text).group(1)
    # who answers is the signed-in person (here the single-user console's), never a form field
    form = {"csrf": csrf, "action": "hand_back", "to": "fixer", "by": "mallory", "text": "5.0", "back": "/handoffs"}
    done = await console.post(f"/runs/{run.workflow_id}/respond", data=form, headers={"Origin": ORIGIN})
    assert done.status_code == 303 and done.headers["location"].startswith("/handoffs?note=Answered")
    assert (await run.result()).answer == "released 5.0"
    closed = await console.get(f"/runs/{run.workflow_id}")
    assert "person:alice → fixer" in closed.text and "console: hand_back to fixer: 5.0" in closed.text
