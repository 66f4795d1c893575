"""`ratchet codec-server` against the requests a hostile web page or a stranger can send, and the
Temporal Web UI's real request shape: a real server process, real HTTP (ratchet/ops/http_guard.py)."""

from __future__ import annotations

import base64
import http.client
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import pytest
from pydantic import SecretStr
from temporalio.api.common.v1 import Payload

from devtools.devserver import free_port
from ratchet.ops.http_guard import GuardSettingsError, HttpGuard, host_name
from ratchet.ops.settings import Settings
from ratchet.payloads.converter import data_converter, encode_payloads

KEYS = "k1:" + base64.b64encode(b"k" * 32).decode()
TOKEN = "tok-" + "7" * 28
UI = "http://localhost:8080"
SECRET = "the plaintext of a tool result"


@dataclass
class Served:
    port: int
    process: subprocess.Popen
    output: list[str] = field(default_factory=list)

    def request(self, method: str, path: str, body: bytes | None = None, **headers: str) -> tuple[int, dict, bytes]:
        headers = {k.replace("_", "-"): v for k, v in headers.items()}
        headers.setdefault("Host", f"127.0.0.1:{self.port}")
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
            for name, value in {**headers, "Content-Length": str(len(body or b""))}.items():
                conn.putheader(name, value)
            conn.endheaders(body)
            answer = conn.getresponse()
            return answer.status, {k.lower(): v for k, v in answer.getheaders()}, answer.read()
        finally:
            conn.close()


@contextmanager
def codec_server(*args: str, token: str | None = None) -> Iterator[Served]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RATCHET_", "TEMPORAL_"))}
    env.update(RATCHET_CODEC_KEYS=KEYS, RATCHET_LOG_LEVEL="DEBUG", **({"RATCHET_CODEC_TOKEN": token} if token else {}))
    process = subprocess.Popen(
        [sys.executable, "-m", "ratchet.cli.main", "codec-server", "--port", str(port), *args],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    served, ready = Served(port, process), threading.Event()

    def read() -> None:
        for line in process.stdout:
            served.output.append(line)
            if line.startswith("ratchet codec server on"):
                ready.set()
        ready.set()  # it ended: the test reads why

    threading.Thread(target=read, daemon=True).start()
    ready.wait(30)
    assert process.poll() is None, "".join(served.output)
    try:
        yield served
    finally:
        process.terminate()
        process.wait(10)


def sealed_body() -> bytes:
    converter = data_converter(Settings(codec_keys=SecretStr(KEYS)))
    plain = Payload(metadata={"encoding": b"json/plain"}, data=json.dumps(SECRET).encode())
    import asyncio

    [sealed] = asyncio.run(encode_payloads(converter, [plain]))
    assert SECRET.encode() not in sealed.SerializeToString()
    return json.dumps({"payloads": [{"metadata": {k: base64.b64encode(v).decode() for k, v in sealed.metadata.items()},
                                     "data": base64.b64encode(sealed.data).decode()}]}).encode()


def plaintext(answer: bytes) -> str:
    [payload] = json.loads(answer)["payloads"]
    return json.loads(base64.b64decode(payload["data"]))


@pytest.fixture(scope="module")
def body() -> bytes:
    return sealed_body()


JSON = {"Content-Type": "application/json"}


def test_a_dns_rebinding_host_is_refused_and_the_loopback_names_answer(body):
    with codec_server() as server:
        for host in (f"evil.example:{server.port}", "evil.example", f"127.0.0.1.evil.example:{server.port}"):
            status, _, answer = server.request("POST", "/decode", body, Host=host, **JSON)
            assert status == 421 and SECRET.encode() not in answer, (host, answer)
        for host in (f"127.0.0.1:{server.port}", f"localhost:{server.port}", f"[::1]:{server.port}"):
            status, _, answer = server.request("POST", "/decode", body, Host=host, **JSON)
            assert status == 200 and plaintext(answer) == SECRET, (host, answer)


def test_a_foreign_origin_and_a_simple_cross_origin_post_are_refused(body):
    with codec_server() as server:
        status, headers, _ = server.request("OPTIONS", "/decode", Origin="http://evil.example",
                                            Access_Control_Request_Method="POST")
        assert status == 403 and "access-control-allow-origin" not in headers
        status, _, answer = server.request("POST", "/decode", body, Origin="http://evil.example",
                                           Content_Type="text/plain")
        assert status == 403 and SECRET.encode() not in answer
        # the same simple POST from the allowed origin, or from no browser at all: not JSON, refused
        for origin in ({"Origin": UI}, {}):
            status, _, answer = server.request("POST", "/decode", body, Content_Type="text/plain", **origin)
            assert status == 415 and b"application/json" in answer and SECRET.encode() not in answer


def test_the_web_uis_request_shape_is_accepted_with_its_passed_access_token(body):
    with codec_server("--cors-origin", UI, token=TOKEN) as server:
        status, headers, _ = server.request(
            "OPTIONS", "/default/decode", Origin=UI, Access_Control_Request_Method="POST",
            Access_Control_Request_Headers="authorization,content-type,x-namespace",
        )
        assert status == 204 and headers["access-control-allow-origin"] == UI
        allowed = {h.strip().lower() for h in headers["access-control-allow-headers"].split(",")}
        assert {"authorization", "content-type", "x-namespace"} <= allowed
        status, headers, answer = server.request(
            "POST", "/default/decode", body, Origin=UI, X_Namespace="default", Authorization=f"Bearer {TOKEN}", **JSON,
        )
        assert status == 200 and plaintext(answer) == SECRET and headers["access-control-allow-origin"] == UI


def test_a_missing_or_wrong_token_is_refused_and_no_token_is_ever_logged(body):
    wrong = "tok-" + "8" * 28
    with codec_server(token=TOKEN) as server:
        for auth in ({}, {"Authorization": f"Bearer {wrong}"}, {"Authorization": TOKEN}, {"Authorization": f"Basic {TOKEN}"}):
            status, _, answer = server.request("POST", "/decode", body, **JSON, **auth)
            assert status == 401 and SECRET.encode() not in answer and TOKEN.encode() not in answer, auth
        status, _, answer = server.request("POST", "/decode", body, Authorization=f"Bearer {TOKEN}", **JSON)
        assert status == 200 and plaintext(answer) == SECRET
    logged = "".join(server.output)
    assert "token required" in logged and "POST /decode" in logged  # DEBUG request lines were logged
    assert TOKEN not in logged and wrong not in logged


def test_encode_is_off_unless_asked_for(body):
    plain = json.dumps({"payloads": [{"metadata": {"encoding": base64.b64encode(b"json/plain").decode()},
                                      "data": base64.b64encode(b'"forged"').decode()}]}).encode()
    with codec_server() as server:
        status, _, answer = server.request("POST", "/encode", plain, **JSON)
        assert status == 403 and b"--encode" in answer
    with codec_server("--encode") as server:
        status, _, answer = server.request("POST", "/encode", plain, **JSON)
        assert status == 200 and b"forged" not in answer


def test_binding_beyond_loopback_needs_a_token_then_still_checks_the_host(body):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RATCHET_", "TEMPORAL_"))}
    done = subprocess.run([sys.executable, "-m", "ratchet.cli.main", "codec-server", "--host", "0.0.0.0", "--port",
                           str(free_port())], env={**env, "RATCHET_CODEC_KEYS": KEYS}, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2 and "RATCHET_CODEC_TOKEN" in done.stdout and "Traceback" not in done.stdout + done.stderr
    with codec_server("--host", "0.0.0.0", "--allowed-host", "codec.internal", token=TOKEN) as server:
        auth = {"Authorization": f"Bearer {TOKEN}", **JSON}
        assert server.request("POST", "/decode", body, Host=f"codec.internal:{server.port}", **auth)[0] == 200
        assert server.request("POST", "/decode", body, Host=f"other.internal:{server.port}", **auth)[0] == 421


def test_the_guard_reads_host_headers_as_browsers_send_them():
    assert [host_name(h) for h in ("a.b:81", "A.B", "[::1]:81", "::1", "127.0.0.1")] == [
        "a.b", "a.b", "::1", "::1", "127.0.0.1"]
    with pytest.raises(GuardSettingsError, match="RATCHET_SERVE_TOKEN"):
        HttpGuard.for_server("192.168.1.5", token_setting="RATCHET_SERVE_TOKEN")
    guard = HttpGuard.for_server("192.168.1.5", token="t")
    assert "192.168.1.5" in guard.allowed_hosts and "localhost" in guard.allowed_hosts


def test_a_server_serving_its_own_pages_allows_its_own_origin_only():
    guard = HttpGuard.for_server("127.0.0.1", same_origin=True)
    own = {"Host": "127.0.0.1:8780", "Origin": "http://127.0.0.1:8780"}
    assert guard.check("POST", own, json_body=False) is None
    other_port = {"Host": "127.0.0.1:8780", "Origin": "http://127.0.0.1:9999"}
    assert guard.check("POST", other_port, json_body=False).status == 403
    rebound = {"Host": "evil.example:8780", "Origin": "http://evil.example:8780"}
    assert guard.check("POST", rebound, json_body=False).status == 421
    assert HttpGuard.for_server("127.0.0.1").check("POST", own, json_body=False).status == 403
    assert HttpGuard.for_server("127.0.0.1", token="s3").accepts_token("s3")
    assert not HttpGuard.for_server("127.0.0.1", token="s3").accepts_token("s4")
