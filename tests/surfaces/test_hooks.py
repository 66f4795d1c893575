"""Webhooks in (issue #43, item 2): `ratchet serve` as a process takes signed deliveries at
POST /hooks/NAME and starts a run, sends a session a message or decides a pending call, through
ratchet.client, on the dev server with a real worker. The same delivery twice acts once; a request
without the right signature starts nothing. `ratchet serve` requires its bearer token of every
other request here; hooks carry a signature instead."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
import uuid

import httpx2 as httpx
import pytest

from ratchet.client import RunNotFound
from ratchet.contracts import Phase
from tests.runs import call, runs, scripted, start, wait_for
from tests.surfaces.test_serve import serving

SECRET = "hook-secret-for-tests"
TOKEN = "serve-token-for-tests"


@pytest.fixture
async def hooked(settings, tmp_path):
    hooks = {
        "issues": {
            "secret": "${ISSUES_SECRET}",
            "run": {
                "agent": "ops",
                "objective": "triage issue #{issue.number}: {issue.title}",
                "model": {"provider": "scripted", "options": {"script": [{"content": "triaged"}]}},
            },
        },
        "chat": {"secret": "${ISSUES_SECRET}", "message": {"session_id": "{channel}", "text": "{text}"}},
        "review": {
            "secret": "${ISSUES_SECRET}",
            "max_age_s": 300,
            "decision": {"workflow_id": "{run}", "call_id": "{call}", "decision": "{verdict}"},
        },
    }
    path = tmp_path / "hooks.json"
    path.write_text(json.dumps({"hooks": hooks}))
    async with serving(settings, RATCHET_HOOKS=str(path), ISSUES_SECRET=SECRET, RATCHET_SERVE_TOKEN=TOKEN) as url:
        yield url


async def deliver(url: str, hook: str, body: dict, delivery: str, secret: str = SECRET, stamp: str | None = None):
    raw = json.dumps(body).encode()
    signed = raw if stamp is None else stamp.encode() + b"." + raw
    headers = {
        "Content-Type": "application/json",
        "X-GitHub-Delivery": delivery,
        "X-Hub-Signature-256": "sha256=" + hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest(),
    }
    if stamp is not None:
        headers["X-Ratchet-Timestamp"] = stamp
    async with httpx.AsyncClient() as http:
        return await http.post(f"{url}/hooks/{hook}", content=raw, headers=headers)


async def test_a_signed_delivery_starts_one_run_however_often_it_is_sent(client, settings, worker, hooked):
    delivery = uuid.uuid4().hex
    issue = {"issue": {"number": 42, "title": "crash on start"}}
    first = await deliver(hooked, "issues", issue, delivery)
    assert first.status_code == 202, first.text
    assert first.json() == {
        "hook": "issues",
        "delivery": delivery,
        "run_id": f"hook-issues-{delivery}",
        "duplicate": False,
    }
    again = await deliver(hooked, "issues", issue, delivery)
    assert again.status_code == 202 and again.json()["duplicate"] is True
    run = runs(client, settings).get(f"hook-issues-{delivery}")
    result = await run.result()
    assert result.phase == Phase.DONE and (await run.state()).run.objective == "triage issue #42: crash on start"
    assert len(await runs(client, settings).list(query=f'WorkflowId="hook-issues-{delivery}"')) == 1


async def test_a_delivery_without_the_right_signature_or_fields_starts_nothing(client, settings, worker, hooked):
    issue = {"issue": {"number": 7, "title": "t"}}
    forged = uuid.uuid4().hex
    refused = await deliver(hooked, "issues", issue, forged, secret="guessed")
    assert refused.status_code == 401 and "X-Hub-Signature-256" in refused.json()["error"]
    missing = uuid.uuid4().hex
    lacking = await deliver(hooked, "issues", {"issue": {"number": 7}}, missing)
    assert lacking.status_code == 400
    assert lacking.json()["error"] == "run.objective: the body has no field 'issue.title'"
    for delivery in (forged, missing):
        with pytest.raises(RunNotFound):
            await runs(client, settings).get(f"hook-issues-{delivery}").describe()
    unknown = await deliver(hooked, "nosuch", issue, uuid.uuid4().hex)
    assert unknown.status_code == 404 and "no hook 'nosuch'" in unknown.json()["error"]
    async with httpx.AsyncClient() as http:  # every other endpoint still wants the token
        assert (await http.get(f"{hooked}/runs/x/events")).status_code == 401


async def test_a_delivery_becomes_a_sessions_message_once(client, settings, worker, hooked):
    script = [{"content": "first answer"}, {"content": "hooked answer"}]
    session = await start(client, settings, scripted("chatter", script, objective="hello"))
    await wait_for(session, lambda s: s.phase == Phase.AWAITING_MESSAGE)
    delivery = uuid.uuid4().hex
    body = {"channel": session.workflow_id, "text": "a message from the hook"}
    for _ in range(2):
        answer = await deliver(hooked, "chat", body, delivery)
        assert answer.status_code == 202 and answer.json()["message_id"] == delivery, answer.text
    state = await wait_for(session, lambda s: len(s.session.turns.items) == 2 and s.phase == Phase.AWAITING_MESSAGE)
    assert [t.question for t in state.session.turns.items] == ["hello", "a message from the hook"]
    assert state.session.turns.items[1].answer == "hooked answer"
    await session.close()


async def test_a_timed_delivery_decides_a_pending_call_and_an_old_one_is_refused(client, settings, worker, hooked):
    script = [{"tool_calls": [call("create_ticket", title="prod: deploy")]}, {"content": "opened"}]
    run = await start(client, settings, scripted("ops", script))
    state = await wait_for(run, lambda s: s.phase == Phase.AWAITING_APPROVAL)
    [pending] = state.calls.pending_approvals
    body = {"run": run.workflow_id, "call": pending.call_id, "verdict": "approve"}
    old = await deliver(hooked, "review", body, uuid.uuid4().hex, stamp=str(int(time.time()) - 3600))
    assert old.status_code == 401 and "X-Ratchet-Timestamp" in old.json()["error"]
    taken = await deliver(hooked, "review", body, uuid.uuid4().hex, stamp=str(int(time.time())))
    assert taken.status_code == 202, taken.text
    assert (await run.result()).phase == Phase.DONE
    decision = (await run.state()).calls.decisions[pending.call_id]
    assert decision.approved and decision.by == "hook:review"
