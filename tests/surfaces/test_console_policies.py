"""The console and approval policies (issue #41, item 4): a run page shows every decision with
what made it (a rule, a grant, a person) and the grants in force; an approval from the page may
carry a grant. In-process over ASGI, on the dev server with a real worker, profile `policy`."""

from __future__ import annotations

import re

import httpx2 as httpx
import pytest

from ratchet.client import RatchetClient
from ratchet.console.app import build_app
from ratchet.contracts import Phase
from ratchet.ops.http_guard import HttpGuard
from tests.runs import call, scripted, wait_for

ORIGIN = "http://127.0.0.1"


@pytest.fixture
async def console(client, settings):
    app = build_app(RatchetClient(client, settings), HttpGuard.for_server("127.0.0.1", same_origin=True))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=ORIGIN, timeout=60) as http:
        yield http


async def test_the_run_page_shows_the_rule_that_approved_and_an_approval_can_grant(client, settings, worker, console):
    script = [
        {"tool_calls": [call("write_file", path="docs/a.md", content="a"), call("probe_pay", amount=150, to="ana")]},
        {"tool_calls": [call("probe_pay", amount=300, to="bob")]},
        {"content": "done"},
    ]
    run = await RatchetClient(client, settings).start(scripted("policy", script, workspace="pol-console"))
    await wait_for(run, lambda s: [p.call_id for p in s.calls.pending_approvals] == ["call_1_1"])
    page = await console.get(f"/runs/{run.workflow_id}")
    assert "<code>rule:write_file path=docs/**</code>" in page.text and "name=grant" in page.text
    form = {"csrf": re.search(r'name=csrf value="([0-9a-f]+)"', page.text).group(1), "call_id": "call_1_1"}
    bad = await console.post(f"/runs/{run.workflow_id}/approve", data={**form, "grant": "forever"})
    assert "grant: seconds, not &#x27;forever&#x27;" in (await console.get(bad.headers["location"])).text
    done = await console.post(f"/runs/{run.workflow_id}/approve", data={**form, "grant": "3600"})
    assert "granted g1 (probe_pay)" in (await console.get(done.headers["location"])).text
    assert (await run.result()).phase == Phase.DONE
    state = await run.state()
    assert state.calls.decisions["call_2_0"].by == "grant:g1"
    shown = (await console.get(f"/runs/{run.workflow_id}")).text
    assert "<code>grant:g1</code>" in shown and "<td>probe_pay</td>" in shown
