"""A small, real, local OpenAI-compatible HTTP server for tests and chaos runs.

Serves scripted chat-completion replies, records every request and injects
programmable or random faults. As strict as the real servers where they are strict: every
historical tool call's `arguments` must parse as JSON (llama.cpp answers 500 "Failed to parse tool
call arguments as JSON", vLLM 400), and a reply may say finish_reason "length". Standard library
only; runs in its own thread.

Reply forms (a "script" is a list of these)::

    {"tool_calls": [{"name": "read_file", "arguments": {"path": "a.py"}, "id": "optional"}]}
    {"content": "final answer"}            # optional "finish_reason" override on either

Fault forms (``enqueue_faults``)::

    {"status": 429, "retry_after": 1}      # also "retry_after_ms", "message"
    {"status": 500} / {"status": 401} / {"status": 400} / any 4xx-5xx
    {"timeout": 2.0}                        # sleep, then serve the reply
    {"truncated": True}                     # Content-Length larger than body, then close (streamed: after 1 chunk)
    {"bad_tool_json": True}                 # scripted reply with malformed arguments
    {"cut_after": 3}                        # streamed: close the connection after 3 chunks
    {"error_after": 3}                      # streamed: an error event (a 500) after 3 chunks
    {"status": 500, "usage": True}          # the error body carries the usage of the prompt, as billed
    {"cut_after": 3, "usage": True}         # streamed: 3 chunks, a usage chunk of what was sent, then close

`counted` holds the tokens the server reported as used (a usage chunk or body, an error body's
usage), summed per key: what a provider would bill.

A request with `"stream": true` gets Server-Sent Events as OpenAI sends them: a role chunk, the
content in pieces of `STREAM_CHARS` characters, each tool call's id and name then its arguments
in pieces, the finish chunk, the usage chunk when `stream_options.include_usage` is set, then
`data: [DONE]`; `chunk_delay_s` (the constructor's) apart.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import signal
import socket
import socketserver
import sys
import threading
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["OpenAIServer", "RecordedRequest", "DEFAULT_FAULT_KINDS", "main"]

DEFAULT_FAULT_KINDS: tuple[str, ...] = ("429", "500", "timeout", "truncated", "bad_tool_json")

DEFAULT_FAULT_TEMPLATES: dict[str, dict[str, Any]] = {
    "429": {"status": 429, "retry_after": 1},
    "500": {"status": 500},
    "503": {"status": 503},
    "400": {"status": 400},
    "401": {"status": 401},
    "timeout": {"timeout": 2.0},
    "truncated": {"truncated": True},
    "bad_tool_json": {"bad_tool_json": True},
}

# status -> (error type, error code, message)
_ERRORS: dict[int, tuple[str, str | None, str]] = {
    400: ("invalid_request_error", None, "Invalid request (injected fault)."),
    401: ("invalid_request_error", "invalid_api_key", "Incorrect API key provided."),
    404: ("invalid_request_error", "unknown_url", "Unknown request URL."),
    429: ("requests", "rate_limit_exceeded", "Rate limit reached (injected fault)."),
    500: ("server_error", None, "The server had an error (injected fault)."),
}

_CHAT_PATHS = ("/v1/chat/completions", "/chat/completions")
_MODEL_PATHS = ("/v1/models", "/models")
_MODELS = ["ratchet-test", "gpt-4o-mini"]


@dataclass
class RecordedRequest:
    """One request as the server saw it, plus what it served."""

    method: str
    path: str
    headers: dict[str, str]
    json: Any
    key: str | None = None  # X-Ratchet-Script header, else bearer API key
    script: str | None = None  # script key actually used (None = default)
    reply_index: int | None = None
    fault: str | None = None
    status: int | None = None
    received_at: float = field(default_factory=time.time)


def error_body(status: int, message: str | None = None) -> dict[str, Any]:
    """OpenAI-style error JSON for ``status``."""
    etype, code, default = _ERRORS.get(status, ("server_error", None, f"HTTP {status} (injected fault)."))
    return {"error": {"message": message or default, "type": etype, "param": None, "code": code}}


def fault_name(fault: dict[str, Any] | None) -> str | None:
    """Short label for a fault dict (for records and counters)."""
    if not fault:
        return None
    if "status" in fault:
        return str(fault["status"])
    for name in ("timeout", "truncated", "bad_tool_json", "cut_after", "error_after"):
        if fault.get(name):
            return name
    return "unknown"


def validate_fault(fault: Any) -> dict[str, Any]:
    """Raise ValueError for fault dicts the server cannot serve."""
    if not isinstance(fault, dict):
        raise ValueError(f"fault must be a dict, got {fault!r}")
    if "status" in fault and not (isinstance(fault["status"], int) and 400 <= fault["status"] <= 599):
        raise ValueError(f"fault status must be 400..599: {fault!r}")
    if fault_name(fault) in (None, "unknown"):
        raise ValueError(f"unrecognised fault: {fault!r}")
    return dict(fault)


def validate_reply(reply: Any) -> dict[str, Any]:
    """Raise ValueError for malformed scripted replies."""
    if not isinstance(reply, dict) or not ("tool_calls" in reply or "content" in reply):
        raise ValueError(f"reply needs 'tool_calls' or 'content': {reply!r}")
    for call in reply.get("tool_calls") or []:
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            raise ValueError(f"tool call needs a 'name': {call!r}")
    return reply


def malformed_json(text: str) -> str:
    """Turn a JSON string into one ``json.loads`` rejects (drops the last brace)."""
    return text[:-1] if text.endswith("}") else '{"broken": ' + text


def _unparsable_arguments(messages: list[Any]) -> str | None:
    """The parse error of the first historical tool call whose `arguments` is not a JSON string."""
    for message in messages:
        calls = message.get("tool_calls") if isinstance(message, dict) else None
        for call in calls or []:
            arguments = (call.get("function") or {}).get("arguments") if isinstance(call, dict) else None
            try:
                json.loads(arguments if isinstance(arguments, str) else "")
            except ValueError as exc:
                return f"[json.exception.parse_error.101] parse error: {exc}"
    return None


def _arguments(raw: Any) -> str:
    return raw if isinstance(raw, str) else json.dumps({} if raw is None else raw)


def _tool_call(call: dict[str, Any], index: int, j: int, bad_json: bool) -> dict[str, Any]:
    args = _arguments(call.get("arguments"))
    return {
        "id": call.get("id") or f"call_{index}_{j}",
        "type": "function",
        "function": {"name": call["name"], "arguments": malformed_json(args) if bad_json else args},
    }


STREAM_CHARS = 8


def stream_chunks(completion: dict[str, Any], include_usage: bool) -> list[dict[str, Any]]:
    """A completion as the chunks of its stream (`chat.completion.chunk`)."""
    choice = completion["choices"][0]
    message = choice["message"]

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": completion["id"],
            "object": "chat.completion.chunk",
            "created": completion["created"],
            "model": completion["model"],
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
        }

    out = [chunk({"role": "assistant", "content": ""})]
    content = message.get("content") or ""
    out += [chunk({"content": content[i : i + STREAM_CHARS]}) for i in range(0, len(content), STREAM_CHARS)]
    for j, call in enumerate(message.get("tool_calls") or []):
        head = {
            "index": j,
            "id": call["id"],
            "type": "function",
            "function": {"name": call["function"]["name"], "arguments": ""},
        }
        out.append(chunk({"tool_calls": [head]}))
        arguments = call["function"]["arguments"]
        out += [
            chunk({"tool_calls": [{"index": j, "function": {"arguments": arguments[i : i + STREAM_CHARS]}}]})
            for i in range(0, len(arguments), STREAM_CHARS)
        ]
    out.append(chunk({}, choice["finish_reason"]))
    if include_usage:
        out.append({**chunk({}), "choices": [], "usage": completion["usage"]})
    return out


def _usage(messages: Any, message: dict[str, Any]) -> dict[str, int]:
    prompt = len(json.dumps(messages, sort_keys=True, default=str)) // 4 + 1
    out = len(message.get("content") or "")
    out += sum(len(c["function"]["name"]) + len(c["function"]["arguments"]) for c in message.get("tool_calls", []))
    completion = out // 4 + 1
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


_OWN_CALL_ID = re.compile(r"^call_(\d+)_\d+$")


def turn_of(messages: list[Any]) -> int:
    """The number of assistant turns before this request: the assistant messages in it, or, when
    the client sends only its latest messages (a context window), one more than the turn in the
    newest tool-call id this server made (`call_{turn}_{j}`). A windowed conversation whose
    script gives its own tool-call ids cannot be placed: it counts as the assistant messages sent."""
    assistant = [m for m in messages if isinstance(m, dict) and m.get("role") == "assistant"]
    newest = -1
    for message in assistant:
        for call in message.get("tool_calls") or []:
            match = _OWN_CALL_ID.match(str(call.get("id", ""))) if isinstance(call, dict) else None
            if match:
                newest = max(newest, int(match.group(1)))
    return max(len(assistant), newest + 1)


def pick_reply(script: list[dict[str, Any]], messages: list[Any]) -> tuple[dict[str, Any], int]:
    """Reply chosen by the turn (`turn_of`): a retried request gets the same reply."""
    index = turn_of(messages)
    if index < len(script):
        return script[index], index
    finals = [r for r in script if r.get("content") is not None and not r.get("tool_calls")]
    return (finals[-1] if finals else {"content": "done"}), index


class _Handler(BaseHTTPRequestHandler):
    """Thin HTTP layer; all logic lives in ``OpenAIServer``."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out in separate writes
    server_version = "ratchet-openai-test/1.0"
    sys_version = ""

    @property
    def owner(self) -> OpenAIServer:
        server = self.server
        assert isinstance(server, _HTTPServer)
        return server.owner

    def do_GET(self) -> None:  # noqa: N802
        self.owner._handle(self)

    def do_POST(self) -> None:  # noqa: N802
        self.owner._handle(self)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        if self.owner.verbose:
            super().log_message(format, *args)

    def read_json(self) -> Any:
        """Request body parsed as JSON (None if empty, ``...`` if invalid)."""
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            return ...

    def write(self, status: int, body: bytes, headers: dict[str, str], send_len: int | None = None) -> None:
        """Send a response; ``send_len`` < len(body) truncates and closes."""
        try:
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            if send_len is not None:
                self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(body if send_len is None else body[:send_len])
            self.wfile.flush()
        except OSError:
            pass  # client went away (e.g. it timed out)
        if send_len is not None:
            self.close_connection = True


class _HTTPServer(ThreadingHTTPServer):
    """ThreadingHTTPServer that tracks open connections so stop() can cut them."""

    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True

    def __init__(self, addr: tuple[str, int], owner: OpenAIServer) -> None:
        self.owner = owner
        self.conns: set[socket.socket] = set()
        self.conns_lock = threading.Lock()
        super().__init__(addr, _Handler)

    def server_bind(self) -> None:
        socketserver.TCPServer.server_bind(self)  # skip the slow getfqdn()
        host, port = self.server_address[:2]
        self.server_name, self.server_port = str(host), int(port)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        with self.conns_lock:
            self.conns.add(request)
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self.conns_lock:
                self.conns.discard(request)

    def close_connections(self) -> None:
        with self.conns_lock:
            conns = list(self.conns)
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class OpenAIServer:
    """Local OpenAI-compatible server with scripted replies and fault injection."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        replies: list[dict[str, Any]] | None = None,
        fault_rate: float = 0.0,
        fault_kinds: list[str] | tuple[str, ...] = DEFAULT_FAULT_KINDS,
        seed: int | None = 0,
        verbose: bool = False,
        chunk_delay_s: float = 0.0,
    ) -> None:
        self.host, self.port, self.verbose = host, port, verbose
        self.chunk_delay_s = chunk_delay_s
        self.fault_rate = fault_rate
        self.fault_kinds = list(fault_kinds)
        self.fault_templates = {k: dict(v) for k, v in DEFAULT_FAULT_TEMPLATES.items()}
        self.rng = random.Random(seed)
        self.requests: list[RecordedRequest] = []
        self.count_by_status: Counter[int] = Counter()
        self.count_by_fault: Counter[str] = Counter()
        self.counted: dict[str | None, Counter[str]] = {}
        """Per key: the prompt and completion tokens reported as used (what a provider would bill)."""
        self._scripts: dict[str | None, list[dict[str, Any]]] = {None: []}
        self._faults: dict[str | None, deque[dict[str, Any]]] = {None: deque()}
        self._lock = threading.RLock()
        self._stopping = threading.Event()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._completions = 0
        if replies is not None:
            self.set_script(replies)

    # ---- lifecycle -------------------------------------------------------

    @property
    def base_url(self) -> str:
        """Base URL for ``openai.AsyncOpenAI(base_url=...)``."""
        return f"http://{self.host}:{self.port}/v1"

    def start(self) -> OpenAIServer:
        """Bind, listen and serve in a daemon thread; returns once listening."""
        if self._httpd is not None:
            return self
        self._stopping.clear()
        self._httpd = _HTTPServer((self.host, self.port), self)
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"openai-server-{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, cut open connections and wake sleeping handlers."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        self._stopping.set()
        httpd.shutdown()
        httpd.close_connections()
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> OpenAIServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # ---- configuration ---------------------------------------------------

    def set_script(self, replies: list[dict[str, Any]], key: str | None = None) -> None:
        """Set replies for ``key`` (bearer API key or X-Ratchet-Script); None = default."""
        checked = [validate_reply(r) for r in replies]
        with self._lock:
            self._scripts[key] = checked

    def enqueue_faults(self, faults: list[dict[str, Any]], key: str | None = None) -> None:
        """Queue faults for the next chat requests (only requests with ``key`` if given)."""
        checked = [validate_fault(f) for f in faults]
        with self._lock:
            self._faults.setdefault(key, deque()).extend(checked)

    def pending_faults(self, key: str | None = None) -> int:
        """Number of queued faults not yet served for ``key``."""
        with self._lock:
            return len(self._faults.get(key, ()))

    def reset(self) -> None:
        """Forget requests, counters and queued faults (scripts are kept)."""
        with self._lock:
            self.requests.clear()
            self.count_by_status.clear()
            self.count_by_fault.clear()
            self.counted.clear()
            self._faults = {None: deque()}

    def chat_requests(self, key: str | None = None) -> list[RecordedRequest]:
        """Recorded chat-completion requests, optionally only for ``key``."""
        with self._lock:
            reqs = [r for r in self.requests if r.path.split("?")[0] in _CHAT_PATHS]
        return [r for r in reqs if key is None or r.key == key]

    # ---- request handling ------------------------------------------------

    def _handle(self, h: _Handler) -> None:
        path = h.path.split("?")[0]
        if path.startswith("/_admin/"):
            return self._admin(h, path)
        rec = self._record(h)
        if h.command == "GET" and path in _MODEL_PATHS:
            return self._send(h, rec, 200, self._models())
        if h.command == "POST" and path in _CHAT_PATHS:
            return self._chat(h, rec)
        self._send(h, rec, 404, error_body(404, f"Unknown path {h.command} {path}"))

    def _record(self, h: _Handler) -> RecordedRequest:
        headers = {k.lower(): v for k, v in h.headers.items()}
        auth = headers.get("authorization", "")
        bearer = auth[7:].strip() if auth.lower().startswith("bearer ") else None
        rec = RecordedRequest(h.command, h.path, headers, h.read_json(), key=headers.get("x-ratchet-script") or bearer)
        with self._lock:
            rec.script = rec.key if rec.key in self._scripts else None
            self.requests.append(rec)
        return rec

    def _send(
        self,
        h: _Handler,
        rec: RecordedRequest,
        status: int,
        body: Any,
        headers: dict[str, str] | None = None,
        truncate: bool = False,
    ) -> None:
        data = json.dumps(body).encode()
        with self._lock:
            rec.status = status
            self.count_by_status[status] += 1
        hdrs = {"Content-Type": "application/json", "x-request-id": f"req_{id(rec):x}", **(headers or {})}
        h.write(status, data, hdrs, send_len=len(data) // 2 if truncate else None)

    def _chat(self, h: _Handler, rec: RecordedRequest) -> None:
        body = rec.json
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return self._send(h, rec, 400, error_body(400, "Request body must be JSON with a 'messages' list."))
        unparsable = _unparsable_arguments(body["messages"])
        if unparsable is not None:  # as llama.cpp does (vLLM answers 400): historical arguments are parsed
            return self._send(
                h, rec, 500, error_body(500, f"Failed to parse tool call arguments as JSON: {unparsable}")
            )
        fault = self._next_fault(rec)
        if fault and "status" in fault:
            return self._send_fault(h, rec, fault)
        if fault and fault.get("timeout") and self._stopping.wait(float(fault["timeout"])):
            h.close_connection = True  # server stopping: drop without a reply
            return None
        completion = self._completion(rec, bool(fault and fault.get("bad_tool_json")))
        if body.get("stream"):
            return self._stream(h, rec, completion, body, fault or {})
        self._count(rec, completion["usage"])
        self._send(h, rec, 200, completion, truncate=bool(fault and fault.get("truncated")))

    def _stream(
        self, h: _Handler, rec: RecordedRequest, completion: dict[str, Any], body: dict[str, Any], fault: dict[str, Any]
    ) -> None:
        chunks = stream_chunks(completion, bool((body.get("stream_options") or {}).get("include_usage")))
        with self._lock:
            rec.status = 200
            self.count_by_status[200] += 1
        h.close_connection = True
        try:
            h.send_response(200)
            h.send_header("Content-Type", "text/event-stream")
            h.send_header("Connection", "close")
            h.end_headers()
            cut_after = 1 if fault.get("truncated") else fault.get("cut_after")  # a streamed body cut short
            for i, chunk in enumerate(chunks):
                if cut_after is not None and i >= cut_after:
                    if fault.get("usage"):  # what was sent so far, as billed
                        h.wfile.write(f"data: {json.dumps(self._sent_usage(rec, completion, chunks[:i]))}\n\n".encode())
                        h.wfile.flush()
                    return
                if chunk.get("usage") is not None:
                    self._count(rec, chunk["usage"])
                if fault.get("error_after") is not None and i >= fault["error_after"]:
                    chunk = error_body(500, "The server had an error while streaming (injected fault).")
                    h.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                    h.wfile.flush()
                    return
                h.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                h.wfile.flush()
                if self.chunk_delay_s and self._stopping.wait(self.chunk_delay_s):
                    return
            h.wfile.write(b"data: [DONE]\n\n")
            h.wfile.flush()
        except OSError:
            pass  # the client went away

    def _count(self, rec: RecordedRequest, usage: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            counter = self.counted.setdefault(rec.key, Counter())
            counter["prompt_tokens"] += usage["prompt_tokens"]
            counter["completion_tokens"] += usage["completion_tokens"]
        return usage

    def _send_fault(self, h: _Handler, rec: RecordedRequest, fault: dict[str, Any]) -> None:
        headers = {}
        if fault.get("retry_after") is not None:
            headers["Retry-After"] = str(fault["retry_after"])
        if fault.get("retry_after_ms") is not None:
            headers["retry-after-ms"] = str(fault["retry_after_ms"])
        body = error_body(fault["status"], fault.get("message"))
        if fault.get("usage"):  # the prompt was billed though the reply failed
            prompt = _usage(rec.json["messages"], {})["prompt_tokens"]
            body["usage"] = self._count(rec, {"prompt_tokens": prompt, "completion_tokens": 0, "total_tokens": prompt})
        self._send(h, rec, fault["status"], body, headers)

    def _sent_usage(self, rec: RecordedRequest, completion: dict[str, Any], sent: list[dict[str, Any]]) -> dict:
        """A usage chunk counting the prompt and the completion chunks sent before a cut."""
        chars = 0
        for chunk in sent:
            for choice in chunk["choices"]:
                delta = choice["delta"]
                chars += len(delta.get("content") or "")
                for call in delta.get("tool_calls") or []:
                    chars += len(call["function"].get("name") or "") + len(call["function"].get("arguments") or "")
        prompt = completion["usage"]["prompt_tokens"]
        usage = {"prompt_tokens": prompt, "completion_tokens": chars // 4 + 1, "total_tokens": prompt + chars // 4 + 1}
        return {
            "id": completion["id"],
            "object": "chat.completion.chunk",
            "created": completion["created"],
            "model": completion["model"],
            "choices": [],
            "usage": self._count(rec, usage),
        }

    def _next_fault(self, rec: RecordedRequest) -> dict[str, Any] | None:
        with self._lock:
            fault = self._pop_fault(rec.key) or self._random_fault()
            rec.fault = fault_name(fault)
            if rec.fault:
                self.count_by_fault[rec.fault] += 1
        return fault

    def _pop_fault(self, key: str | None) -> dict[str, Any] | None:
        for k in (key, None) if key is not None else (None,):
            queue = self._faults.get(k)
            if queue:
                return queue.popleft()
        return None

    def _random_fault(self) -> dict[str, Any] | None:
        if self.fault_rate <= 0 or not self.fault_kinds or self.rng.random() >= self.fault_rate:
            return None
        return dict(self.fault_templates[self.rng.choice(self.fault_kinds)])

    def _completion(self, rec: RecordedRequest, bad_json: bool) -> dict[str, Any]:
        with self._lock:
            script = list(self._scripts.get(rec.script, self._scripts[None]))
            self._completions += 1
            n = self._completions
        reply, index = pick_reply(script, rec.json["messages"])
        rec.reply_index = index
        calls = [_tool_call(c, index, j, bad_json) for j, c in enumerate(reply.get("tool_calls") or [])]
        message: dict[str, Any] = {"role": "assistant", "content": reply.get("content"), "refusal": None}
        if calls:
            message["tool_calls"] = calls
        finish = reply.get("finish_reason") or ("tool_calls" if calls else "stop")
        return {
            "id": f"chatcmpl-{n}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": rec.json.get("model") or "ratchet-test",
            "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
            "usage": _usage(rec.json["messages"], message),
        }

    def _models(self) -> dict[str, Any]:
        data = [{"id": m, "object": "model", "created": 0, "owned_by": "ratchet"} for m in _MODELS]
        return {"object": "list", "data": data}

    # ---- admin (for a server running in a separate process) --------------

    def stats(self) -> dict[str, Any]:
        """Counters as plain JSON-able data."""
        with self._lock:
            return {
                "requests": len(self.requests),
                "count_by_status": {str(k): v for k, v in self.count_by_status.items()},
                "count_by_fault": dict(self.count_by_fault),
                "pending_faults": {str(k): len(q) for k, q in self._faults.items()},
            }

    def _admin(self, h: _Handler, path: str) -> None:
        """POST /_admin/script {replies,key}, /_admin/faults {faults,key}, /_admin/reset; GET /_admin/stats."""
        body = h.read_json() if h.command == "POST" else None
        body = body if isinstance(body, dict) else {}
        try:
            if path == "/_admin/script":
                self.set_script(body.get("replies") or [], body.get("key"))
            elif path == "/_admin/faults":
                self.enqueue_faults(body.get("faults") or [], body.get("key"))
            elif path == "/_admin/reset":
                self.reset()
            elif path != "/_admin/stats":
                raise ValueError(f"unknown admin path {path}")
        except ValueError as exc:
            return h.write(400, json.dumps(error_body(400, str(exc))).encode(), {"Content-Type": "application/json"})
        h.write(200, json.dumps(self.stats()).encode(), {"Content-Type": "application/json"})


# ---- standalone ----------------------------------------------------------


def load_script_file(server: OpenAIServer, path: str) -> None:
    """Load a JSON file: a replies list, or {"replies", "scripts": {key: replies}, "faults"}."""
    with open(path, encoding="utf-8") as fh:
        data = json.load(fh)
    if isinstance(data, list):
        data = {"replies": data}
    server.set_script(data.get("replies") or [])
    for key, replies in (data.get("scripts") or {}).items():
        server.set_script(replies, key)
    server.enqueue_faults(data.get("faults") or [])


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m ratchet.testing.openai_server", description=__doc__.splitlines()[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--script", help="JSON file with replies (see load_script_file)")
    p.add_argument("--fault-rate", type=float, default=0.0)
    p.add_argument("--fault-kinds", default=",".join(DEFAULT_FAULT_KINDS), help="comma list of fault kinds")
    p.add_argument("--timeout-fault-seconds", type=float, default=None, help="sleep used by random timeout faults")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--verbose", action="store_true")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run in the foreground until SIGTERM/SIGINT; first stdout line is the base URL."""
    args = _parse_args(argv)
    kinds = [k.strip() for k in args.fault_kinds.split(",") if k.strip()]
    server = OpenAIServer(
        args.host, args.port, fault_rate=args.fault_rate, fault_kinds=kinds, seed=args.seed, verbose=args.verbose
    )
    unknown = [k for k in kinds if k not in server.fault_templates]
    if unknown:
        print(f"unknown fault kinds: {unknown}", file=sys.stderr)
        return 2
    if args.timeout_fault_seconds is not None:
        server.fault_templates["timeout"] = {"timeout": args.timeout_fault_seconds}
    if args.script:
        load_script_file(server, args.script)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    with server:
        print(server.base_url, flush=True)
        while not done.wait(0.2):
            pass
    print(json.dumps(server.stats()), file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
