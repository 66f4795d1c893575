"""A recording proxy between the worker and llama-server's Anthropic endpoint (`POST /v1/messages`).

It forwards each request as it came and each reply as it arrives (a stream stays a stream) and
keeps both, so the run can be checked against what the server really sent: every `tool_use` block
of a reply, assembled here from the raw events with nothing of Ratchet's or the SDK's code, must be
a tool call of the reply the run recorded. A difference is a tool call lost (or changed) on the way.
"""

from __future__ import annotations

import http.client
import json
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

HOP_BY_HOP = {"host", "connection", "keep-alive", "transfer-encoding", "content-length", "accept-encoding"}


@dataclass
class Exchange:
    """One request and the reply the server sent, as bytes."""

    request: dict[str, Any]
    status: int
    content_type: str
    body: bytes

    @property
    def streamed(self) -> bool:
        return self.content_type.startswith("text/event-stream")

    def tool_calls(self) -> list[tuple[str, Any]]:
        """The reply's tool_use blocks as (name, input), in content order: from the reply's JSON, or
        assembled from a stream's events (each block's partial JSON joined by its index; the first
        start of an index names the block)."""
        if not self.streamed:
            reply = json.loads(self.body)
            return [(b["name"], b.get("input", {})) for b in reply.get("content", []) if b.get("type") == "tool_use"]
        names: dict[int, str] = {}
        parts: dict[int, list[str]] = {}
        for event in sse_events(self.body):
            block = event.get("content_block") or {}
            if event.get("type") == "content_block_start" and block.get("type") == "tool_use":
                names.setdefault(event["index"], block["name"])
                parts.setdefault(event["index"], [])
            delta = event.get("delta") or {}
            if event.get("type") == "content_block_delta" and delta.get("type") == "input_json_delta":
                parts.setdefault(event["index"], []).append(delta["partial_json"])
        return [(names[i], _parsed("".join(parts[i]))) for i in sorted(names)]


def _parsed(text: str) -> Any:
    """A block's joined JSON; not valid JSON, the text as written (what the run must record then)."""
    try:
        return json.loads(text or "{}")
    except ValueError:
        return text


def sse_events(body: bytes) -> list[dict[str, Any]]:
    """The `data:` payloads of a server-sent event stream, parsed."""
    events = []
    for chunk in body.decode("utf-8", errors="replace").replace("\r\n", "\n").split("\n\n"):
        data = "\n".join(line[5:].strip() for line in chunk.split("\n") if line.startswith("data:"))
        if data and data != "[DONE]":
            events.append(json.loads(data))
    return events


class RecordingProxy:
    """`base_url` for the worker's ANTHROPIC_BASE_URL; `exchanges` once the run is over."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.exchanges: list[Exchange] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        self._server.proxy = self  # type: ignore[attr-defined]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> RecordingProxy:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def record(self, exchange: Exchange) -> None:
        with self._lock:
            self.exchanges.append(exchange)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"  # the reply ends when the connection closes: a stream passes as it comes

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass

    def do_POST(self) -> None:  # noqa: N802
        proxy: RecordingProxy = self.server.proxy  # type: ignore[attr-defined]
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
        upstream = http.client.HTTPConnection("127.0.0.1", proxy.upstream_port, timeout=600)
        upstream.request("POST", self.path, body=body, headers=headers)
        reply = upstream.getresponse()
        self.send_response(reply.status)
        for name, value in reply.getheaders():
            if name.lower() not in HOP_BY_HOP:
                self.send_header(name, value)
        self.end_headers()
        received = bytearray()
        while chunk := reply.read1(65536):
            received += chunk
            self.wfile.write(chunk)
            self.wfile.flush()
        upstream.close()
        try:
            request = json.loads(body)
        except ValueError:
            request = {}
        proxy.record(Exchange(request, reply.status, reply.getheader("content-type") or "", bytes(received)))
