"""A small, real, local Anthropic-compatible Messages API server for tests and the bench.

Strict where the API is: every request is validated against the anthropic SDK's own request types
(`MessageCreateParams`) and the API's rules: no top-level field the API does not take (`API_FIELDS`:
the SDK's, and the sampling fields the API takes that anthropic 2.x no longer names); the first turn
is the user's and roles alternate; every `tool_use` is answered by a `tool_result` with its id in the
next user turn, results before any text; no empty text block; at most 4 `cache_control` breakpoints;
tool names and ids of the allowed characters; `input_schema` an object schema; `temperature` and
`top_p` within 0..1. A request that breaks one is answered 400 `invalid_request_error` naming the
rule, and recorded (`rejected`). Replies stream (SSE, `"stream": true`) or not, built from the SDK's
response types.

Reply forms (a "script" is a list of these, chosen by the conversation's assistant turns)::

    {"tool_calls": [{"name": "read_file", "arguments": {"path": "a.py"}, "id": "optional"}]}
    {"content": "final answer"}
    {"content": "...", "stop_reason": "max_tokens"}     # cut off (also when the reply exceeds max_tokens)
    {"stop_reason": "refusal"} / {"stop_reason": "pause_turn", "content": "..."}
    {"tool_calls": [{"name": "write_file", "arguments": '{"path": "a", "content": "b}}'}]}   # not valid JSON
    {..., "llama_server": true}                         # streamed the way llama-server streams it

Tool call arguments given as a string are streamed as written; a string that is not valid JSON is
`{}` in a reply that does not stream (llama-server's fallback). A reply marked `llama_server`
streams as llama.cpp's llama-server does on `/v1/messages`: a tool_use block starts without
`input`, its JSON comes in pieces of LLAMA_PIECE characters, its start is sent again before its
last piece (the server's last batch announces the tool call anew), and every block stops at the end.

Faults (``enqueue_faults``): ``{"status": 429, "retry_after": 1}``, ``{"status": 529}`` (overloaded),
``{"status": 500}``, any 4xx-5xx; for a streamed reply ``{"cut_after": 3}`` (the connection closes
after 3 events) and ``{"error_after": 3}`` (an `error` event, overloaded, after 3 events);
``{"status": 500, "usage": true}`` answers with the prompt's usage in the error body (billed though
it failed). `counted(key)` sums
what the server reported as used, per usage field: what the API would bill. A stream
writes text in deltas of STREAM_PIECE characters, and a tool call's JSON input likewise.

Prompt caching is simulated: a breakpoint's prefix (tools, system, messages up to the marked block)
seen before under the same key is a cache read; a new one is a cache write. Tokens are characters / 4.
"""

from __future__ import annotations

import hashlib
import json
import re
import socketserver
import threading
import uuid
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from anthropic.types import Message, TextBlock, ToolUseBlock, Usage
from anthropic.types.message_create_params import (
    MessageCreateParamsBase,
    MessageCreateParamsNonStreaming,
    MessageCreateParamsStreaming,
)
from pydantic import TypeAdapter, ValidationError

__all__ = ["AnthropicServer", "RecordedRequest", "check_request"]

_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,128}$")
_ID = re.compile(r"^[a-zA-Z0-9_-]+$")
_OWN_ID = re.compile(r"^call_(\d+)_\d+$")
MAX_BREAKPOINTS = 4
STREAM_PIECE = 8
"""Characters per text delta (and per piece of a tool call's partial JSON) of a streamed reply."""
LLAMA_PIECE = 3
"""Characters per piece of a tool call's partial JSON, streamed as llama-server does (about a token)."""
LOOKBACK = 20
"""Blocks before a breakpoint at which the API still finds an earlier cache entry."""
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}
SAMPLING = frozenset({"temperature", "top_p", "top_k"})
"""Body fields the API takes that the installed SDK may not name (2.x sends them through `extra_body`)."""
SENT_AS_HEADERS = frozenset({"user_profile_id", "workspace_id"})
"""The SDK's request fields it sends as headers, not in the body."""
API_FIELDS = (frozenset(MessageCreateParamsBase.__annotations__) | {"stream"} | SAMPLING) - SENT_AS_HEADERS
"""The top-level fields of a request body the API takes; any other is refused, as the API refuses it."""
_ADAPTERS: dict[bool, TypeAdapter] = {}
_ADAPTERS_LOCK = threading.Lock()


@dataclass
class RecordedRequest:
    headers: dict[str, str]
    json: Any
    key: str | None
    status: int = 200
    error: str | None = None
    usage: dict[str, int] = field(default_factory=dict)
    reported: dict[str, int] = field(default_factory=dict)
    """The usage the client was told (the reply's, the last one a stream delivered, an error body's):
    what the API bills."""


def _adapter(stream: bool) -> TypeAdapter:
    with _ADAPTERS_LOCK:
        if stream not in _ADAPTERS:
            _ADAPTERS[stream] = TypeAdapter(MessageCreateParamsStreaming if stream else MessageCreateParamsNonStreaming)
        return _ADAPTERS[stream]


def _materialized(value: Any) -> Any:
    """pydantic validates the SDK's `Iterable[...]` fields lazily: consume them, so every block is checked."""
    if isinstance(value, dict):
        return {k: _materialized(v) for k, v in value.items()}
    if isinstance(value, (str, bytes, int, float, bool)) or value is None:
        return value
    return [_materialized(v) for v in value]


def check_request(body: Any) -> str | None:
    """Why the API would refuse `body` (a Messages API request), or None."""
    if not isinstance(body, dict):
        return "the body must be a JSON object"
    unknown = sorted(set(body) - API_FIELDS)
    if unknown:
        return f"{unknown[0]}: Extra inputs are not permitted"
    try:
        _materialized(_adapter(bool(body.get("stream"))).validate_python(body))
    except ValidationError as exc:
        first = exc.errors()[0]
        return f"{'.'.join(str(p) for p in first['loc'])}: {first['msg']}"
    return _rules(body)


def _rules(body: dict[str, Any]) -> str | None:
    if body["max_tokens"] < 1:
        return "max_tokens: must be at least 1"
    for name in ("temperature", "top_p"):
        value = body.get(name, 0)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
            return f"{name}: must be a number between 0 and 1"
    top_k = body.get("top_k", 0)
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 0:
        return "top_k: must be a non-negative integer"
    names = [t.get("name") for t in body.get("tools", [])]
    for tool in body.get("tools", []):
        if not _NAME.match(str(tool.get("name"))):
            return f"tools: name {tool.get('name')!r} must match {_NAME.pattern}"
        if tool.get("input_schema", {}).get("type") != "object":
            return f"tools.{tool['name']}.input_schema: type must be 'object'"
    if len(set(names)) != len(names):
        return "tools: tool names must be unique"
    system = body.get("system")
    blocks = [*body.get("tools", []), *(system if isinstance(system, list) else [])]
    messages = body["messages"]
    if not messages or messages[0]["role"] != "user":
        return "messages: the first message must use the user role"
    pending: set[str] = set()
    for i, message in enumerate(messages):
        content = message["content"]
        content = [{"type": "text", "text": content}] if isinstance(content, str) else content
        blocks += content
        if i and message["role"] == messages[i - 1]["role"]:
            return f"messages.{i}: roles must alternate between user and assistant"
        problem = _turn(i, message["role"], content, pending)
        if problem:
            return problem
        pending = {b["id"] for b in content if b["type"] == "tool_use"}
    if pending:
        return f"messages: tool_use ids {sorted(pending)} have no tool_result after them"
    if sum("cache_control" in b for b in blocks) > MAX_BREAKPOINTS:
        return f"a maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided"
    return None


def _turn(i: int, role: str, content: list[dict[str, Any]], pending: set[str]) -> str | None:
    for block in content:
        if block["type"] == "text" and not block["text"].strip():
            return f"messages.{i}: text content blocks must contain non-whitespace text"
        if block["type"] == "tool_use" and (role != "assistant" or not _ID.match(block["id"])):
            return f"messages.{i}: tool_use {block['id']!r}: only in assistant turns, id matching {_ID.pattern}"
        if block["type"] == "tool_use" and not isinstance(block["input"], dict):
            return f"messages.{i}: tool_use {block['id']!r}: input must be an object"
    results = [b["tool_use_id"] for b in content if b["type"] == "tool_result"]
    if role == "user":
        if sorted(results) != sorted(pending):
            return (
                f"messages.{i}: tool_use ids {sorted(pending)} must each be answered by a tool_result in this turn "
                f"(found {sorted(results)})"
            )
        kinds = [b["type"] for b in content]
        if results and kinds[: len(results)] != ["tool_result"] * len(results):
            return f"messages.{i}: tool_result blocks must come first in the user turn"
    elif results:
        return f"messages.{i}: tool_result blocks only in user turns"
    return None


def _tokens(value: Any) -> int:
    return len(json.dumps(value, sort_keys=True)) // 4 + 1


def _cache_parts(body: dict[str, Any]) -> list[tuple[Any, bool]]:
    """The cacheable prefix in the API's order (tools, system, messages), block by block, each with
    whether it carries a breakpoint; the marker itself is not part of the content."""
    system = body.get("system")
    blocks: list[Any] = [*body.get("tools", []), *(system if isinstance(system, list) else [{"text": system or ""}])]
    for message in body["messages"]:
        content = message["content"]
        blocks += [{"text": content}] if isinstance(content, str) else content
    return [({k: v for k, v in b.items() if k != "cache_control"}, "cache_control" in b) for b in blocks]


class AnthropicServer:
    """Local Anthropic-compatible server: scripted replies per API key, faults, a simulated cache."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host, self.port = host, port
        self.requests: list[RecordedRequest] = []
        self._scripts: dict[str | None, list[dict[str, Any]]] = {None: []}
        self._faults: dict[str | None, deque[dict[str, Any]]] = {}
        self._cached: dict[str | None, set[str]] = {}
        self._lock = threading.RLock()
        self._httpd: ThreadingHTTPServer | None = None

    @property
    def base_url(self) -> str:
        """For `anthropic.AsyncAnthropic(base_url=...)` (ANTHROPIC_BASE_URL)."""
        return f"http://{self.host}:{self.port}"

    def start(self) -> AnthropicServer:
        self._httpd = _HTTPServer((self.host, self.port), _Handler)
        self._httpd.owner = self
        self.port = self._httpd.server_address[1]
        threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> AnthropicServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def set_script(self, replies: list[dict[str, Any]], key: str | None = None) -> None:
        with self._lock:
            self._scripts[key] = list(replies)

    def enqueue_faults(self, faults: list[dict[str, Any]], key: str | None = None) -> None:
        with self._lock:
            self._faults.setdefault(key, deque()).extend(faults)

    def requests_of(self, key: str | None = None) -> list[RecordedRequest]:
        with self._lock:
            return [r for r in self.requests if key is None or r.key == key]

    def counted(self, key: str | None = None) -> dict[str, int]:
        """What the server reported as used to `key`'s requests, summed per usage field."""
        total: dict[str, int] = {}
        for record in self.requests_of(key):
            for name, value in record.reported.items():
                total[name] = total.get(name, 0) + value
        return total

    def rejected(self, key: str | None = None) -> list[RecordedRequest]:
        """Requests answered 400 because they broke the API's rules."""
        return [r for r in self.requests_of(key) if r.status == 400]

    # ---- one request -------------------------------------------------------

    def handle(self, headers: dict[str, str], body: Any) -> tuple[int, dict[str, str], Any]:
        """(status, headers, JSON body or a list of SSE events)."""
        key = headers.get("x-api-key") or headers.get("authorization", "").removeprefix("Bearer ") or None
        record = RecordedRequest(headers=headers, json=body, key=key)
        with self._lock:
            self.requests.append(record)
            fault = self._faults.get(key, deque()).popleft() if self._faults.get(key) else None
        if key is None:
            return self._error(record, 401, "x-api-key header is required")
        if "anthropic-version" not in headers:
            return self._error(record, 400, "anthropic-version: header is required")
        if fault is not None and "status" in fault:
            extra = {"retry-after": str(fault["retry_after"])} if "retry_after" in fault else {}
            status, headers, error = self._error(record, fault["status"], fault.get("message", "injected fault"), extra)
            if fault.get("usage"):  # the prompt was billed though the reply failed
                prompt = _tokens([block for block, _ in _cache_parts(body)])
                error["usage"] = record.reported = {"input_tokens": prompt, "output_tokens": 0}
            return status, headers, error
        problem = check_request(body)
        if problem is not None:
            return self._error(record, 400, problem)
        message, wire = self._reply(body, key)
        record.usage = record.reported = message.usage.model_dump(exclude_none=True)
        if body.get("stream"):
            events = _faulty(_events(message, wire), fault or {})
            record.reported = _reported(events)
            return 200, {"content-type": "text/event-stream"}, events
        return 200, {"content-type": "application/json"}, message.model_dump(mode="json", exclude_none=True)

    def _error(self, record: RecordedRequest, status: int, message: str, headers: dict[str, str] | None = None):
        record.status, record.error = status, message
        kind = _ERROR_TYPES.get(status, "api_error")
        return (
            status,
            {"content-type": "application/json", **(headers or {})},
            {
                "type": "error",
                "error": {"type": kind, "message": message},
            },
        )

    def _reply(self, body: dict[str, Any], key: str | None) -> tuple[Message, _Wire]:
        with self._lock:
            script = self._scripts.get(key) or self._scripts[None]
        turn = _turn_of(body["messages"])
        reply = script[turn] if turn < len(script) else {"content": "(the script has no more replies)"}
        content: list[Any] = [TextBlock(type="text", text=reply["content"])] if reply.get("content") else []
        wire = _Wire(llama_server=bool(reply.get("llama_server")))
        for j, call in enumerate(reply.get("tool_calls") or []):
            arguments = call.get("arguments", {})
            written = arguments if isinstance(arguments, str) else json.dumps(arguments)
            wire.arguments[len(content)] = written
            content.append(
                ToolUseBlock(
                    type="tool_use", id=call.get("id") or f"call_{turn}_{j}", name=call["name"], input=_object(written)
                )
            )
        stop = reply.get("stop_reason") or ("tool_use" if reply.get("tool_calls") else "end_turn")
        output = _tokens([b.model_dump() for b in content]) if content else 1
        if output > body["max_tokens"]:  # the reply is cut where the limit falls
            stop, content = (
                "max_tokens",
                [TextBlock(type="text", text=(reply.get("content") or "")[: body["max_tokens"] * 4])],
            )
            output = body["max_tokens"]
        message = Message(
            id=f"msg_{uuid.uuid4().hex[:24]}",
            type="message",
            role="assistant",
            model=body["model"],
            content=content,
            stop_reason=stop,
            stop_sequence=None,
            usage=self._usage(body, key, output),
        )
        return message, wire

    def _usage(self, body: dict[str, Any], key: str | None, output: int) -> Usage:
        """A breakpoint reads the longest cached prefix ending at it or up to LOOKBACK blocks before it
        (as the API looks back for an earlier breakpoint's entry), and writes its own prefix."""
        parts = _cache_parts(body)
        marks = [i for i, (_, marked) in enumerate(parts) if marked]
        parts = [block for block, _ in parts]
        total = _tokens(parts) if parts else 1
        digest = [
            hashlib.sha256(json.dumps(parts[: i + 1], sort_keys=True).encode()).hexdigest() for i in range(len(parts))
        ]
        read = written = 0
        with self._lock:
            cached = self._cached.setdefault(key, set())
            reachable = {j for i in marks for j in range(max(0, i - LOOKBACK), i + 1)}
            hit = max((j for j in reachable if digest[j] in cached), default=None)
            if hit is not None:
                read = _tokens(parts[: hit + 1])
            if marks and marks[-1] != hit:
                written = _tokens(parts[: marks[-1] + 1]) - read
            cached.update(digest[i] for i in marks)
        return Usage(
            input_tokens=max(total - read - written, 0),
            output_tokens=output,
            cache_read_input_tokens=read,
            cache_creation_input_tokens=written,
        )


@dataclass
class _Wire:
    """How a reply goes out beyond its content: its tool calls' JSON as written (by content index)
    and whether it streams the way llama-server does."""

    llama_server: bool = False
    arguments: dict[int, str] = field(default_factory=dict)


def _object(written: str) -> dict[str, Any]:
    """A tool call's input in a reply that does not stream: JSON that is not an object is `{}`."""
    try:
        value = json.loads(written)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _turn_of(messages: list[dict[str, Any]]) -> int:
    """The assistant turns before this request; with a context window, one more than the newest
    turn named in this server's own tool_use ids (`call_{turn}_{j}`)."""
    assistant = [m for m in messages if m["role"] == "assistant"]
    newest = -1
    for message in assistant:
        for block in message["content"] if isinstance(message["content"], list) else []:
            match = _OWN_ID.match(str(block.get("id", ""))) if block.get("type") == "tool_use" else None
            if match:
                newest = max(newest, int(match.group(1)))
    return max(len(assistant), newest + 1)


def _reported(events: list[tuple[str, dict[str, Any]]]) -> dict[str, int]:
    """The usage a stream's delivered events told: message_start's, then each message_delta's totals."""
    usage: dict[str, int] = {}
    for kind, data in events:
        if kind == "message_start":
            usage = dict(data["message"]["usage"])
        elif kind == "message_delta":
            usage.update(data["usage"])
    return {k: v for k, v in usage.items() if isinstance(v, int)}


def _faulty(events: list[tuple[str, dict[str, Any]]], fault: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """A stream cut short (`cut_after`) or broken by an `error` event (`error_after`)."""
    if "cut_after" in fault:
        return events[: fault["cut_after"]]
    if "error_after" in fault:
        error = {"type": "overloaded_error", "message": "Overloaded (injected fault mid-stream)"}
        return [*events[: fault["error_after"]], ("error", {"type": "error", "error": error})]
    return events


def _pieces(text: str, size: int = STREAM_PIECE) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _events(message: Message, wire: _Wire) -> list[tuple[str, dict[str, Any]]]:
    """The message as the API streams it: message_start, each block's start, deltas and stop,
    message_delta (stop reason, output tokens), message_stop; as llama-server streams it if the
    reply says so (`_Wire`)."""
    start = message.model_dump(mode="json", exclude_none=True)
    start.update(content=[], stop_reason=None)
    events: list[tuple[str, dict[str, Any]]] = [("message_start", {"type": "message_start", "message": start})]
    stops = []
    for index, block in enumerate(message.content):
        first: dict[str, Any]
        if isinstance(block, TextBlock):
            first = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": piece} for piece in _pieces(block.text)]
        else:
            assert isinstance(block, ToolUseBlock), "this server writes text and tool_use blocks only"
            first = {"type": "tool_use", "id": block.id, "name": block.name}
            if not wire.llama_server:
                first["input"] = {}
            size = LLAMA_PIECE if wire.llama_server else STREAM_PIECE
            deltas = [{"type": "input_json_delta", "partial_json": p} for p in _pieces(wire.arguments[index], size)]
        started = ("content_block_start", {"type": "content_block_start", "index": index, "content_block": first})
        pieces = [("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d}) for d in deltas]
        if wire.llama_server and first["type"] == "tool_use":
            pieces.insert(len(pieces) - 1, started)  # its last batch announces the call again
        stop = ("content_block_stop", {"type": "content_block_stop", "index": index})
        events += [started, *pieces]
        if wire.llama_server:
            stops.append(stop)
        else:
            events.append(stop)
    events += stops
    events += [
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": message.stop_reason, "stop_sequence": None},
                "usage": {"output_tokens": message.usage.output_tokens},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    return events


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    owner: AnthropicServer

    def server_bind(self) -> None:
        socketserver.TCPServer.server_bind(self)  # skip the slow getfqdn()
        host, port = self.server_address[:2]
        self.server_name, self.server_port = str(host), int(port)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "ratchet-anthropic-test/1.0"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass

    def do_POST(self) -> None:  # noqa: N802
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        headers = {k.lower(): v for k, v in self.headers.items()}
        if self.path.split("?")[0] != "/v1/messages":
            status, out, body = (
                404,
                {"content-type": "application/json"},
                {"type": "error", "error": {"type": "not_found_error", "message": self.path}},
            )
        else:
            try:
                parsed = json.loads(raw)
            except ValueError:
                parsed = None
            server = self.server
            assert isinstance(server, _HTTPServer)
            status, out, body = server.owner.handle(headers, parsed)
        if isinstance(body, list):
            self._stream(out, body)
            return
        data = json.dumps(body).encode()
        self.send_response(status)
        for name, value in out.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _stream(self, headers: dict[str, str], events: list[tuple[str, dict[str, Any]]]) -> None:
        self.send_response(200)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Connection", "close")
        self.end_headers()
        for name, data in events:
            self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
            self.wfile.flush()
        self.close_connection = True
