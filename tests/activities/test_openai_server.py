"""Tests for ratchet.testing.openai_server driven by the real openai client."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import openai
import pytest

from ratchet.testing.openai_server import OpenAIServer

ROOT = Path(__file__).resolve().parents[2]
USER = [{"role": "user", "content": "fix the bug"}]
SCRIPT = [
    {"tool_calls": [{"name": "read_file", "arguments": {"path": "a.py"}}]},
    {"content": "all done"},
]


@pytest.fixture
def server():
    with OpenAIServer(replies=SCRIPT) as srv:
        yield srv


def client(srv: OpenAIServer, key: str = "k", timeout: float = 5.0) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=srv.base_url, api_key=key, max_retries=0, timeout=timeout)


async def ask(c: openai.AsyncOpenAI, messages=USER, **kw):
    return await c.chat.completions.create(model="ratchet-test", messages=messages, **kw)


@pytest.mark.asyncio
async def test_tool_call_round_trip(server):
    c = client(server)
    first = await ask(c)
    call = first.choices[0].message.tool_calls[0]
    assert first.choices[0].finish_reason == "tool_calls"
    assert (call.id, call.function.name, json.loads(call.function.arguments)) == ("call_0_0", "read_file", {"path": "a.py"})
    history = USER + [first.choices[0].message.model_dump(exclude_none=True),
                      {"role": "tool", "tool_call_id": call.id, "content": "print(1)"}]
    second = await ask(c, history)
    assert second.choices[0].message.content == "all done"
    assert second.choices[0].finish_reason == "stop"
    assert second.usage.total_tokens == second.usage.prompt_tokens + second.usage.completion_tokens
    # A retry of the first request gets the same reply (chosen by assistant count).
    again = await ask(c)
    assert again.choices[0].message.tool_calls[0].id == "call_0_0"
    # Past the end of the script: the last content reply.
    past = await ask(c, history + [{"role": "assistant", "content": "x"}] * 3)
    assert past.choices[0].message.content == "all done"
    assert [r.reply_index for r in server.chat_requests()] == [0, 1, 0, 4]
    assert server.count_by_status[200] == 4
    models = await c.models.list()
    assert "ratchet-test" in [m.id for m in models.data]
    await c.close()


@pytest.mark.asyncio
async def test_rate_limit_with_retry_after(server):
    server.enqueue_faults([{"status": 429, "retry_after": 1}])
    c = client(server)
    with pytest.raises(openai.RateLimitError) as info:
        await ask(c)
    assert info.value.response.headers["retry-after"] == "1"
    assert info.value.status_code == 429
    assert (await ask(c)).choices[0].message.tool_calls  # queue drained
    assert server.count_by_status[429] == 1 and server.requests[0].fault == "429"
    await c.close()


@pytest.mark.asyncio
async def test_auth_and_server_errors(server):
    server.enqueue_faults([{"status": 401}, {"status": 500}, {"status": 400}])
    c = client(server)
    with pytest.raises(openai.AuthenticationError) as info:
        await ask(c)
    assert "Incorrect API key provided" in str(info.value)
    with pytest.raises(openai.InternalServerError):
        await ask(c)
    with pytest.raises(openai.BadRequestError):
        await ask(c)
    assert [r.status for r in server.requests] == [401, 500, 400]
    await c.close()


@pytest.mark.asyncio
async def test_timeout(server):
    server.enqueue_faults([{"timeout": 1.0}])
    c = client(server, timeout=0.5)
    with pytest.raises(openai.APITimeoutError):
        await ask(c)
    await c.close()


@pytest.mark.asyncio
async def test_truncated_body_is_connection_error(server):
    server.enqueue_faults([{"truncated": True}])
    c = client(server)
    with pytest.raises(openai.APIConnectionError) as info:
        await ask(c)
    assert not isinstance(info.value, openai.APITimeoutError)
    assert "complete message body" in str(info.value.__cause__)
    await c.close()


@pytest.mark.asyncio
async def test_bad_tool_json(server):
    server.enqueue_faults([{"bad_tool_json": True}])
    c = client(server)
    args = (await ask(c)).choices[0].message.tool_calls[0].function.arguments
    assert args.startswith('{"path": "a.py"')
    with pytest.raises(json.JSONDecodeError):
        json.loads(args)
    await c.close()


@pytest.mark.asyncio
async def test_per_key_scripts_and_faults(server):
    server.set_script([{"content": "from alpha"}], key="alpha")
    server.set_script([{"tool_calls": [{"name": "t", "arguments": "{}", "id": "fixed"}]}], key="beta")
    server.enqueue_faults([{"status": 500}], key="beta")
    alpha, beta, other = client(server, "alpha"), client(server, "beta"), client(server, "zzz")
    assert (await ask(alpha)).choices[0].message.content == "from alpha"
    assert (await ask(other)).choices[0].message.tool_calls[0].function.name == "read_file"
    with pytest.raises(openai.InternalServerError):
        await ask(beta)
    assert (await ask(beta)).choices[0].message.tool_calls[0].id == "fixed"
    # X-Ratchet-Script header wins over the API key.
    hdr = await ask(other, extra_headers={"X-Ratchet-Script": "alpha"})
    assert hdr.choices[0].message.content == "from alpha"
    assert [r.script for r in server.chat_requests()] == ["alpha", None, "beta", "beta", "alpha"]
    for c in (alpha, beta, other):
        await c.close()


@pytest.mark.asyncio
async def test_records_idempotency_key(server):
    c = client(server)
    await ask(c, extra_headers={"Idempotency-Key": "act-123"})
    rec = server.requests[-1]
    assert rec.method == "POST" and rec.path == "/v1/chat/completions"
    assert rec.headers["idempotency-key"] == "act-123"
    assert rec.headers["authorization"] == "Bearer k"
    assert rec.json["messages"] == USER and rec.status == 200
    await c.close()


async def _faults_seen(seed: int) -> list[str | None]:
    with OpenAIServer(replies=SCRIPT, fault_rate=0.5, fault_kinds=["500", "bad_tool_json"], seed=seed) as srv:
        c = client(srv)
        for _ in range(12):
            try:
                await ask(c)
            except openai.InternalServerError:
                pass
        await c.close()
        return [r.fault for r in srv.requests]


@pytest.mark.asyncio
async def test_random_faults_are_seeded():
    faults = await _faults_seen(7)
    assert {"500", "bad_tool_json", None} <= set(faults)
    assert faults == await _faults_seen(7)


def test_standalone_process(tmp_path):
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"replies": [{"content": "hello"}], "scripts": {"x": [{"content": "for x"}]}}))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "ratchet.testing.openai_server", "--port", "0", "--script", str(script), "--seed", "1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT,
    )
    try:
        base = proc.stdout.readline().strip()
        assert base.startswith("http://127.0.0.1:") and base.endswith("/v1")
        req = urllib.request.Request(
            base + "/chat/completions", method="POST",
            data=json.dumps({"model": "m", "messages": USER}).encode(),
            headers={"Authorization": "Bearer x", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=5) as resp:
            assert json.load(resp)["choices"][0]["message"]["content"] == "for x"
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=5)
    assert proc.returncode == 0
    assert json.loads(err.strip().splitlines()[-1])["count_by_status"] == {"200": 1}
