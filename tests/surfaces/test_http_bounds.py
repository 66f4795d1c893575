"""Every HTTP server Ratchet starts reads a request only as far as it must: `ratchet serve`, `ratchet
console` and `ratchet codec-server` as real processes on real sockets.

- A body over a server's limit (ratchet/ops/http_guard.py `BodyLimit`) is 413 as it arrives: a
  chunked body of up to 1 GiB, or one that declares 1 GiB, is refused after at most the limit (plus
  what the sockets buffer) has been sent, the server's peak memory grows by less than twice its limit,
  and it answers the next request.
- A request Temporal refuses as such (an empty or 2,000-character id) is 400 naming the field, a path
  that is none of the server's 404: never a 502.

The body is sent by httpx's synchronous client: it reads the answer after the server stopped reading
(asyncio's transport drops it once the write fails, so an async client sees a reset instead).
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import httpx2 as httpx
import pytest

from devtools.workers import WorkerProcess
from ratchet.console.guard import MAX_FORM_BYTES
from ratchet.payloads.codec_server import MAX_BODY_BYTES as CODEC_MAX_BYTES
from ratchet.serve.app import MAX_BODY_BYTES as SERVE_MAX_BYTES
from tests.ops_workers import ROOT

CHUNK = b"x" * (64 * 1024)
ENDLESS = 1 << 30
JSON = {"Content-Type": "application/json"}
FORM = {"Content-Type": "application/x-www-form-urlencoded"}


@dataclass(frozen=True)
class Surface:
    name: str
    argv: tuple[str, ...]
    ready: str
    limit: int
    path: str
    """Where a body is read (past the guard: Host, Origin, token and media type pass)."""
    headers: dict[str, str]
    check: Callable[[httpx.Client], None]
    """A normal request, answered as usual (asserts)."""


def _serve_answers(http: httpx.Client) -> None:
    missing = http.get("/runs/no-such-run/events")
    assert missing.status_code == 404 and "run not found" in missing.json()["error"], missing.text


def _console_answers(http: httpx.Client) -> None:
    page = http.get("/start")
    assert page.status_code == 200 and "csrf" in page.text, page.text[:300]


def _codec_answers(http: httpx.Client) -> None:
    answer = http.post("/decode", content=b'{"payloads": []}', headers=JSON)
    assert answer.status_code == 200 and answer.json() == {}, answer.text


SURFACES = [
    Surface("serve", ("serve",), "ratchet serve on", SERVE_MAX_BYTES, "/agui", JSON, _serve_answers),
    Surface("console", ("console",), "ratchet console on", MAX_FORM_BYTES, "/start", FORM, _console_answers),
    Surface(
        "codec-server", ("codec-server",), "ratchet codec server on", CODEC_MAX_BYTES, "/decode", JSON, _codec_answers
    ),
]


@pytest.fixture(scope="module")
async def servers(dev_server) -> AsyncIterator[dict[str, WorkerProcess]]:
    """The three servers, on free ports, the first two on the session's dev server."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RATCHET_", "TEMPORAL_"))}
    env["TEMPORAL_ADDRESS"] = dev_server.address
    started: dict[str, WorkerProcess] = {}
    try:
        for surface in SURFACES:
            argv = [sys.executable, "-m", "ratchet.cli.main", *surface.argv, "--port", "0"]
            process = WorkerProcess(argv, env=env, cwd=ROOT, ready=surface.ready, name=surface.name)
            started[surface.name] = await process.start(timeout=60)
        yield started
    finally:
        for process in started.values():
            await process.stop()


def base_url(process: WorkerProcess) -> str:
    found = re.search(r"http://[^\s/]+", process.ready_line or "")
    assert found, process.ready_line
    return found.group(0)


def peak_rss(pid: int) -> int:
    """The process's peak resident memory so far (VmHWM), in bytes."""
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmHWM:\s+(\d+) kB", status).group(1)) * 1024


def send_large(url: str, headers: dict[str, str], declared: bool) -> tuple[httpx.Response, int]:
    """POST up to ENDLESS bytes in chunks (or declared as Content-Length: ENDLESS) until the server
    stops reading; the answer and how many bytes the body generator gave out."""
    sent = 0

    def body():
        nonlocal sent
        while sent < ENDLESS:
            sent += len(CHUNK)
            yield CHUNK

    length = {"Content-Length": str(ENDLESS)} if declared else {}
    with httpx.Client(timeout=120) as http:
        answer = http.post(url, content=body(), headers={**headers, **length})
    return answer, sent


@pytest.mark.parametrize("declared", [False, True], ids=["chunked", "content-length"])
@pytest.mark.parametrize("surface", SURFACES, ids=[s.name for s in SURFACES])
async def test_a_body_over_the_limit_is_refused_as_it_arrives_and_the_server_carries_on(servers, surface, declared):
    process = servers[surface.name]
    url = base_url(process)
    with httpx.Client(base_url=url, timeout=30) as http:
        surface.check(http)  # warm: the first request's imports are not the body's
    before = peak_rss(process.pid)
    answer, sent = await asyncio.to_thread(send_large, url + surface.path, surface.headers, declared)
    grown = peak_rss(process.pid) - before
    print(
        f"\n{surface.name} {'declared' if declared else 'chunked'}: limit {surface.limit >> 20} MiB, "
        f"client gave out {sent >> 20} MiB, peak RSS {before >> 20} -> {(before + grown) >> 20} MiB"
    )
    assert answer.status_code == 413, (answer.status_code, answer.text[:300])
    assert f"limit of {surface.limit >> 20} MiB" in answer.text and answer.headers["connection"] == "close"
    assert sent < surface.limit + (64 << 20), f"the server read on: {sent} bytes sent"
    assert grown < 2 * surface.limit + (32 << 20), f"peak RSS grew by {grown} bytes"
    assert process.returncode is None
    with httpx.Client(base_url=url, timeout=30) as http:
        surface.check(http)


def agui_input(thread_id: str) -> dict:
    return {
        "threadId": thread_id,
        "runId": "r1",
        "state": {},
        "tools": [],
        "context": [],
        "messages": [{"id": "m1", "role": "user", "content": "hello"}],
        "forwardedProps": {"agent": "coder"},
    }


async def test_serve_answers_bad_ids_400_and_unknown_paths_404(servers):
    with httpx.Client(base_url=base_url(servers["serve"]), timeout=30) as http:
        empty = http.get("/runs//events")
        assert empty.status_code == 400 and "workflow_id: WorkflowId is not set" in empty.json()["error"], empty.text
        assert http.get(f"/runs/{'a' * 2000}/events").status_code == 404  # no run has such an id
        for thread, problem in (("", "threadId: must not be empty"), ("t" * 2000, "threadId: WorkflowId exceeds")):
            refused = http.post("/agui", json=agui_input(thread))
            assert refused.status_code == 400 and problem in refused.json()["error"], refused.text
        for path in ("/runs/x/x", "/runs/x", "/nothing"):
            assert http.get(path).status_code == 404, path
        assert http.get("/agui").status_code == 405  # the path exists: POST


async def test_console_answers_unknown_paths_404_and_known_ones_with_the_wrong_method_405(servers):
    with httpx.Client(base_url=base_url(servers["console"]), timeout=30) as http:
        assert http.get(f"/runs/{'a' * 2000}").status_code == 404
        for method, path in (("GET", "/runs/x/x"), ("POST", "/runs/x/bogus"), ("GET", "/nothing")):
            answer = http.request(method, path, headers=FORM)
            assert answer.status_code == 404 and "Not found" in answer.text, (method, path, answer.status_code)
        assert http.get("/runs/x/approve").status_code == 405
