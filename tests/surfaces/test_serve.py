"""`ratchet serve` as a process, on the dev server with a real worker: Server-Sent Events resumed
with Last-Event-ID, the HTTP guard, and the AG-UI endpoint driven by the official @ag-ui/client
under node (installed by this test from npm into ~/.cache/ratchet, no root)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import httpx2 as httpx
import pytest

from devtools.workers import WorkerProcess
from ratchet.client import RatchetClient
from tests.ops.test_encryption import encrypted  # noqa: F401  (the fixture: an encrypting client and worker)
from tests.ops_workers import ROOT
from tests.runs import scripted

pytestmark = pytest.mark.e2e  # slow: `make test-e2e`, not `make test`

AGUI_CLIENT = "@ag-ui/client@1.0.0"
NPM_CACHE = Path.home() / ".cache" / "ratchet" / "ag-ui-client-1.0.0"
REPLY = "Wrote the greeting; it reads hello."


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
async def served(settings):
    async with serving(settings, "--cors-origin", "http://app.test") as url:
        yield url


@contextlib.asynccontextmanager
async def serving(settings, *args: str, **env: str):
    """`ratchet serve` as a process on the test's server and queue, with `args` and `env` (no
    RATCHET_SERVE_TOKEN unless given); its base URL."""
    port = free_port()
    environ = dict(os.environ, TEMPORAL_ADDRESS=settings.temporal_address, RATCHET_TASK_QUEUE=settings.task_queue)
    environ.pop("RATCHET_SERVE_TOKEN", None)
    server = WorkerProcess(
        [sys.executable, "-m", "ratchet.cli.main", "serve", "--port", str(port), *args],
        env={**environ, **env},
        cwd=ROOT,
        ready="ratchet serve on",
        name="ratchet serve",
    )
    await server.start(timeout=30)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await server.stop()


async def sse(url: str, **headers: str) -> list[dict]:
    """A whole SSE response (the run closes, the stream ends), as {id, event, data} records."""
    records, record = [], {}
    async with httpx.AsyncClient(timeout=60) as http:
        async with http.stream("GET", url, headers=headers) as response:
            assert response.status_code == 200, await response.aread()
            async for line in response.aiter_lines():
                if not line:
                    if "data" in record:
                        records.append(record)
                    record = {}
                elif not line.startswith(":"):
                    name, _, value = line.partition(":")
                    record[name] = value.strip()
    return records


async def test_events_over_sse_resume_with_last_event_id_and_the_guard_holds(client, settings, worker, served):
    run = await RatchetClient(client, settings).start(
        scripted("probe", [{"tool_calls": [{"name": "probe_echo", "arguments": {"text": "hi"}}]}, {"content": REPLY}])
    )
    records = await asyncio.wait_for(sse(f"{served}/runs/{run.workflow_id}/events"), 60)
    assert [int(r["id"]) for r in records] == list(range(len(records)))
    assert records[-1]["event"] == "end" and json.loads(records[-1]["data"])["answer"] == REPLY
    assert {"attempt_started", "text", "tool_call_started", "tool_call_finished", "phase"} <= {r["event"] for r in records}
    middle = records[len(records) // 2]["id"]
    resumed = await sse(f"{served}/runs/{run.workflow_id}/events", **{"Last-Event-ID": middle})
    assert [r["id"] for r in resumed] == [r["id"] for r in records[int(middle) + 1 :]]
    answers = await sse(f"{served}/runs/{run.workflow_id}/events?topics=answer")
    assert [r["event"] for r in answers] == ["end"]
    async with httpx.AsyncClient(timeout=10) as http:
        missing = await http.get(f"{served}/runs/no-such-{uuid.uuid4().hex[:6]}/events")
        assert missing.status_code == 404 and "run not found" in missing.json()["error"]
        bad_topic = await http.get(f"{served}/runs/{run.workflow_id}/events?topics=nope")
        assert bad_topic.status_code == 400 and "unknown topic 'nope'" in bad_topic.json()["error"]
        beyond = await http.get(f"{served}/runs/{run.workflow_id}/events?from_offset=99999")
        assert beyond.status_code == 400 and "beyond the end" in beyond.json()["error"]
        rebound = await http.get(f"{served}/runs/{run.workflow_id}/events", headers={"Host": "evil.example"})
        assert rebound.status_code == 421
        foreign = await http.get(f"{served}/runs/{run.workflow_id}/events", headers={"Origin": "http://evil.example"})
        assert foreign.status_code == 403
        page = await http.get(f"{served}/runs/{run.workflow_id}/events?topics=answer", headers={"Origin": "http://app.test"})
        assert page.status_code == 200 and page.headers["access-control-allow-origin"] == "http://app.test"
        simple_post = await http.post(f"{served}/agui", content="{}", headers={"Content-Type": "text/plain"})
        assert simple_post.status_code == 415


def test_serve_refuses_to_bind_beyond_loopback_without_a_token():
    env = {k: v for k, v in os.environ.items() if k != "RATCHET_SERVE_TOKEN"}
    done = subprocess.run(
        [sys.executable, "-m", "ratchet.cli.main", "serve", "--host", "0.0.0.0", "--port", "0"],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 2 and "set RATCHET_SERVE_TOKEN" in done.stdout, done.stdout + done.stderr


def agui_client() -> Path:
    """@ag-ui/client from npm, installed once into the cache directory."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node and npm are needed for the AG-UI client test")
    if not (NPM_CACHE / "node_modules" / "@ag-ui" / "client" / "package.json").exists():
        NPM_CACHE.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund", "--prefix", str(NPM_CACHE), AGUI_CLIENT],
            check=True, capture_output=True, timeout=600,
        )
    return NPM_CACHE / "node_modules" / "@ag-ui" / "client"


DRIVER = """
const { HttpAgent } = require(process.env.AGUI_CLIENT);
const input = JSON.parse(process.argv[2]);
const agent = new HttpAgent({ url: input.url, threadId: input.threadId,
  initialMessages: [{ id: "m1", role: "user", content: input.objective }] });
const events = [];
agent.runAgent({ forwardedProps: input.props, runId: input.runId }, { onEvent({ event }) { events.push(event); } })
  .then((result) => { console.log(JSON.stringify({ events, result: result.result, messages: agent.messages })); })
  .catch((error) => { console.log(JSON.stringify({ error: String(error), events })); process.exit(1); });
"""


async def agui(served: str, tmp_path: Path, thread: str, text: str, props: dict, run_id: str | None = None) -> dict:
    """One AG-UI run by the official client under node: its events, its result and its messages."""
    package = agui_client()
    driver = tmp_path / "driver.js"
    driver.write_text(DRIVER)
    request = {"url": f"{served}/agui", "threadId": thread, "objective": text, "props": props, "runId": run_id}
    proc = await asyncio.create_subprocess_exec(
        "node", str(driver), json.dumps(request), env=dict(os.environ, AGUI_CLIENT=str(package)),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 90)
    assert proc.returncode == 0, out.decode()
    return json.loads(out.decode().strip().splitlines()[-1])


async def test_the_agui_endpoint_drives_a_run_with_the_official_client(client, settings, worker, served, tmp_path):
    script = [
        {"content": "Writing it.", "tool_calls": [{"name": "write_file", "arguments": {"path": "g.txt", "content": "hello"}}]},
        {"content": REPLY},
    ]
    thread = f"agui-{uuid.uuid4().hex[:8]}"
    props = {"agent": "probe", "model": {"provider": "scripted", "options": {"script": script}}}
    seen = await agui(served, tmp_path, thread, "write a greeting", props)
    types = [e["type"] for e in seen["events"]]
    assert types[0] == "RUN_STARTED" and types[1] == "STATE_SNAPSHOT" and types[-1] == "RUN_FINISHED"
    for kind in ("STEP_STARTED", "STEP_FINISHED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END",
                 "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "TOOL_CALL_RESULT", "STATE_DELTA"):
        assert kind in types, (kind, types)
    assert seen["result"] == {"answer": REPLY}
    texts = [m.get("content") for m in seen["messages"] if m["role"] == "assistant"]
    assert "Writing it." in texts and REPLY in texts, seen["messages"]
    calls = [c for m in seen["messages"] for c in m.get("toolCalls") or []]
    assert [c["function"]["name"] for c in calls] == ["write_file"]
    assert json.loads(calls[0]["function"]["arguments"]) == {"path": "g.txt", "content": "hello"}
    result = await RatchetClient(client, settings).get(thread).result()
    assert result.answer == REPLY


async def test_a_session_is_one_agui_run_per_turn_on_its_thread(client, settings, worker, served, tmp_path):
    script = [{"content": "answer one"}, {"content": "answer two"}]
    thread = f"agui-chat-{uuid.uuid4().hex[:8]}"
    props = {k: v for k, v in scripted("chatter", script).items() if k != "objective"}
    first = await agui(served, tmp_path, thread, "first question", props)
    types = [e["type"] for e in first["events"]]
    assert types[0] == "RUN_STARTED" and types[-1] == "RUN_FINISHED", types
    assert first["result"] == {"answer": "answer one", "turn": 1}
    assert "answer one" in [m.get("content") for m in first["messages"] if m["role"] == "assistant"]

    second = await agui(served, tmp_path, thread, "second question", {}, run_id="turn-two")
    assert second["result"] == {"answer": "answer two", "turn": 2}
    shown = "".join(e["delta"] for e in second["events"] if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert shown == "answer two"  # this turn's text, once; not the first turn's
    again = await agui(served, tmp_path, thread, "second question", {}, run_id="turn-two")
    assert again["result"] == {"answer": "answer two", "turn": 2}  # the same input again: answered once
    run = RatchetClient(client, settings).get(thread)
    state = await run.state()
    assert [(t.number, t.answer) for t in state.session.turns.items] == [(1, "answer one"), (2, "answer two")]
    await run.close()
    assert (await run.result()).answer == "answer two"


async def test_an_agui_message_to_a_running_run_joins_its_conversation(client, settings, worker, served, tmp_path):
    rc = RatchetClient(client, settings)
    script = [
        {"tool_calls": [{"name": "create_ticket", "arguments": {"title": "prod outage", "body": "x"}}]},
        {"content": "ticket filed"},
    ]
    run = await rc.start(scripted("approver", script))
    async with asyncio.timeout(30):
        while not (await run.state()).calls.pending_approvals:
            await asyncio.sleep(0.1)
    call_id = (await run.state()).calls.pending_approvals[0].call_id
    answered = asyncio.create_task(agui(served, tmp_path, run.workflow_id, "also page on-call", {}))
    async with asyncio.timeout(30):  # the message is in the run (its inbox) before the approval lets the step end
        while "also page on-call" not in [m.text for m in (await run.state()).session.inbox]:
            await asyncio.sleep(0.1)
    await run.approve(call_id)
    seen = await answered
    types = [e["type"] for e in seen["events"]]
    assert types[0] == "RUN_STARTED" and types[-1] == "RUN_FINISHED", types
    customs = [e["name"] for e in seen["events"] if e["type"] == "CUSTOM"]
    assert "ratchet.approval_decided" in customs and "ratchet.approval_requested" not in customs  # only what came next
    assert seen["result"] == {"answer": "ticket filed"}
    assert "also page on-call" in [m.content for m in (await run.state()).conversation.messages.items]


async def test_an_encrypted_runs_stream_is_served_decoded_with_the_workers_keys(encrypted, tmp_path):  # noqa: F811  (the fixture imported above)
    enc_client, keyed = encrypted
    marker = f"plain-{uuid.uuid4().hex}"
    run = await RatchetClient(enc_client, keyed).start(scripted("probe", [{"content": f"the answer is {marker}"}]))
    await run.result()
    history = await run.history()
    assert marker.encode() not in history.to_json().encode(), "the stream's items are encrypted in history"
    port = free_port()
    env = dict(os.environ, TEMPORAL_ADDRESS=keyed.temporal_address, RATCHET_TASK_QUEUE=keyed.task_queue,
               RATCHET_CODEC_KEYS=keyed.codec_keys.get_secret_value(), RATCHET_ARTIFACT_DIR=str(keyed.artifact_dir))
    async with WorkerProcess(
        [sys.executable, "-m", "ratchet.cli.main", "serve", "--port", str(port)],
        env=env, cwd=ROOT, ready="ratchet serve on", name="ratchet serve",
    ):
        records = await asyncio.wait_for(sse(f"http://127.0.0.1:{port}/runs/{run.workflow_id}/events"), 60)
    text = "".join(json.loads(r["data"])["text"] for r in records if r["event"] == "text")
    assert text == f"the answer is {marker}"
