"""A stdio MCP server this worker starts, and the client that speaks to it: newline-delimited
JSON-RPC 2.0 over the program's stdin and stdout.

Ours, client included, rather than the SDK's `stdio_client` and `ClientSession`:

- **Cost.** A call is one `json.dumps`, one line each way and one check of the answer
  (`CallToolResult`). The SDK's session turned each message into pydantic models, passed it through
  three anyio streams and a tracing span: about 1.2 ms of the worker's CPU per call against 0.3 ms
  for a `@tool` (bench/mcp_calls.py measures the difference).
- **Large answers.** The SDK re-joined its read buffer for every chunk of a line, so a 20 MB result
  took 13 s (here 0.4 s: asyncio's `readline`); a line over `McpServer.max_message_bytes` ends the
  connection rather than the worker's memory.
- **stderr** goes to the worker's log (redacted there) line by line, not to the raw stderr.

The protocol, as the MCP spec has it for stdio: `initialize` offering the SDK's latest handshake
version (any handshake version the SDK knows is accepted), then `notifications/initialized`.
Requests from the server: `ping` is answered; anything else (sampling, roots, elicitation: this
client declares none of them) gets "method not found". A request abandoned (the activity cancelled,
no answer in time) is announced with `notifications/cancelled`. Shutdown follows the spec's order:
close stdin, wait, then SIGTERM and SIGKILL to the server's process group, every wait bounded and
shielded from cancellation.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
from contextlib import suppress
from typing import Any

from ratchet.mcp.config import McpConfigError, McpServer
from ratchet.mcp.errors import McpInterrupted, McpRefused, McpUnavailable, validated

log = logging.getLogger("ratchet.mcp")

EXIT_GRACE_S = 0.5
"""After stdin closes, how long the server may take to exit before SIGTERM (then as long to SIGKILL)."""
EXIT_CODE_WAIT_S = 0.2
"""After its stdout ends, how long to wait for the server's exit code (for the error message)."""
STDERR_LINE_CHARS = 2000
STDERR_KEPT_LINES = 5
METHOD_NOT_FOUND = -32601
LARGE_LINE_BYTES = 1 << 20
"""A message longer than this is parsed in a thread (a 20 MB tool result: about 0.2 s of CPU)."""


class _NotSent(Exception):
    """The connection had ended before the request was written: it cannot have acted."""


class _Ended(Exception):
    """The connection ended while the request was in flight."""


class _Answered(Exception):
    """The server answered the request with a JSON-RPC error."""

    def __init__(self, code: Any, message: str) -> None:
        super().__init__(f"error {code}: {message}")
        self.code, self.message = code, message


class StdioConnection:
    """One running server program and the JSON-RPC session over its stdin and stdout."""

    def __init__(self, server: McpServer, env: dict[str, str]) -> None:
        assert server.command is not None
        self.server = server
        self.env = env
        self.process: asyncio.subprocess.Process | None = None
        self.ended: str | None = None
        """Why the connection ended on the server's side (exited, a message too large), once it has."""
        self.stderr_tail: list[str] = []
        """Its last lines of stderr (for the error when it dies)."""
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._last_id = 0
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.returncode is None and self.ended is None

    def story(self) -> str:
        return f"the server {self.exit_story()}"

    def exit_story(self) -> str:
        code = self.process.returncode if self.process is not None else None
        said = f"; its last stderr: {' | '.join(self.stderr_tail)}" if self.stderr_tail else ""
        return f"{self.ended or 'exited'}{'' if code is None else f' (exit code {code})'}{said}"

    # --- the pool's interface (ratchet/mcp/pool.py) ------------------------------------------

    async def open(self) -> None:
        """Start the program and hand-shake within `startup_timeout_s`, or raise McpConfigError
        (it cannot start, or speaks no protocol version this client knows) or McpUnavailable."""
        name = self.server.name
        try:
            async with asyncio.timeout(self.server.startup_timeout_s):
                await self._start()
        except TimeoutError:
            await self.close()
            raise McpUnavailable(
                f"MCP server {name!r} did not start and hand-shake in {self.server.startup_timeout_s:g}s"
            ) from None
        except BaseException:
            await self.close()
            raise

    async def close(self) -> None:
        """Stop the program; its pipes are read to their end, so they close with it."""
        if self.process is not None:
            await asyncio.shield(_stop(self.process))
        if self._tasks:
            _, running = await asyncio.wait(self._tasks, timeout=EXIT_GRACE_S)
            for task in running:
                task.cancel()
        self.ended = self.ended or "was stopped"

    async def call_tool(self, tool: str, arguments: dict[str, Any], meta: dict[str, Any], timeout_s: float) -> Any:
        """`tools/call`; the SDK's `CallToolResult`, checked."""
        import mcp_types as types

        name = self.server.name
        try:
            raw = await self._request("tools/call", {"name": tool, "arguments": arguments, "_meta": meta}, timeout_s)
        except _NotSent:
            raise McpUnavailable(f"MCP server {name!r} {self.exit_story()}") from None
        except _Ended:
            raise McpInterrupted(f"MCP server {name!r}: {tool} was interrupted: {self.story()}") from None
        except TimeoutError:
            raise McpInterrupted(f"MCP server {name!r}: {tool} was interrupted: no answer in {timeout_s:g}s") from None
        except _Answered as exc:
            raise McpRefused(f"the server answered with error {exc.code}: {exc.message}") from None
        return validated(types.CallToolResult, raw, "tool result")

    async def list_tools_page(self, cursor: str | None) -> Any:
        """One page of `tools/list`: the SDK's `ListToolsResult`."""
        import mcp_types as types

        try:
            raw = await self._request("tools/list", {"cursor": cursor} if cursor is not None else {}, None)
        except (_NotSent, _Ended):
            raise McpUnavailable(f"MCP server {self.server.name!r} did not list its tools: {self.story()}") from None
        except _Answered as exc:
            raise McpUnavailable(f"MCP server {self.server.name!r} did not list its tools: {exc}") from None
        try:
            return validated(types.ListToolsResult, raw, "tool list")
        except McpRefused as exc:
            raise McpConfigError(f"MCP server {self.server.name!r}: {exc}") from None

    # --- the session ----------------------------------------------------------------------------

    async def _start(self) -> None:
        from mcp.client.stdio import get_default_environment
        from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION

        server = self.server
        try:
            self.process = await asyncio.create_subprocess_exec(
                server.command or "",
                *server.args,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=get_default_environment() | self.env,
                cwd=server.cwd,
                limit=server.max_message_bytes,
                start_new_session=True,
            )
        except (FileNotFoundError, PermissionError, NotADirectoryError) as exc:
            raise McpConfigError(
                f"MCP server {server.name!r}: cannot start {server.command!r}: {exc.strerror or exc}"
            ) from None
        self._tasks = [
            asyncio.create_task(self._read(), name=f"mcp {server.name} stdout"),
            asyncio.create_task(self._log_stderr(), name=f"mcp {server.name} stderr"),
        ]
        hello = {
            "protocolVersion": LATEST_HANDSHAKE_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "ratchet", "version": "1"},
        }
        try:
            answer = await self._request("initialize", hello, None)
        except (_NotSent, _Ended):
            raise McpUnavailable(
                f"MCP server {server.name!r} ({server.command}) {self.exit_story()} during its start"
            ) from None
        except _Answered as exc:
            raise McpConfigError(f"MCP server {server.name!r} refused the handshake: {exc}") from None
        version = answer.get("protocolVersion") if isinstance(answer, dict) else None
        if version not in HANDSHAKE_PROTOCOL_VERSIONS:
            raise McpConfigError(
                f"MCP server {server.name!r} answered the handshake with protocol version {version!r}; "
                f"this worker speaks {', '.join(HANDSHAKE_PROTOCOL_VERSIONS)}"
            )
        self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    async def _request(self, method: str, params: dict[str, Any], timeout_s: float | None) -> Any:
        """Send a request and wait for its answer: the result, or _Answered (an error), _Ended,
        _NotSent, TimeoutError. Only here are futures added to `_pending`, with no await between
        the liveness check and the addition, so the reader's end always finds them."""
        if not self.alive:
            raise _NotSent()
        self._last_id += 1
        request_id = self._last_id
        answer = asyncio.get_running_loop().create_future()
        self._pending[request_id] = answer
        try:
            async with asyncio.timeout(timeout_s):
                self._send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
                assert self.process is not None and self.process.stdin is not None
                with suppress(BrokenPipeError, ConnectionResetError):  # it died: the reader ends the request
                    await self.process.stdin.drain()
                return await answer
        except (asyncio.CancelledError, TimeoutError):
            if not answer.done() and method != "initialize":  # the spec forbids cancelling initialize
                self._send(
                    {
                        "jsonrpc": "2.0",
                        "method": "notifications/cancelled",
                        "params": {"requestId": request_id, "reason": "abandoned by the caller"},
                    }
                )
            raise
        finally:
            self._pending.pop(request_id, None)

    def _send(self, message: dict[str, Any]) -> None:
        if self.process is None or self.process.stdin is None or self.process.stdin.is_closing():
            return
        line = json.dumps(message, ensure_ascii=False, separators=(",", ":")) + "\n"
        with suppress(BrokenPipeError, ConnectionResetError):
            self.process.stdin.write(line.encode("utf-8"))

    async def _read(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        stdout = self.process.stdout
        try:
            while True:
                try:
                    line = await stdout.readline()
                except ValueError:  # no newline within the limit
                    self.ended = f"sent a message over {self.server.max_message_bytes:,} bytes"
                    self._end_requests()
                    while await stdout.read(1 << 16):  # dropped, so the pipe sees its end once the server is stopped
                        pass
                    break
                if not line:
                    with suppress(TimeoutError):
                        await asyncio.wait_for(asyncio.shield(self.process.wait()), EXIT_CODE_WAIT_S)
                    self.ended = self.ended or "exited"
                    break
                if len(line) > LARGE_LINE_BYTES:  # megabytes of JSON: parsed off the event loop
                    self._receive(line, await asyncio.to_thread(_parsed, line))
                elif line.strip():
                    self._receive(line, _parsed(line))
        finally:
            self.ended = self.ended or "stopped answering"
            self._end_requests()

    def _end_requests(self) -> None:
        for answer in self._pending.values():
            if not answer.done():
                answer.set_exception(_Ended())

    def _receive(self, line: bytes, parsed: Any) -> None:
        messages = parsed if isinstance(parsed, list) else [parsed]  # a batch (protocol 2025-03-26) or one
        if not all(isinstance(m, dict) for m in messages) or not messages:
            log.warning("MCP server %s sent a line that is not a JSON-RPC message: %.200r", self.server.name, line)
            return
        for message in messages:
            self._dispatch(message)

    def _dispatch(self, message: dict[str, Any]) -> None:
        method = message.get("method")
        if isinstance(method, str):
            if "id" in message:
                self._answer(message["id"], method)
            elif method == "notifications/message":
                log.info("MCP server %s says: %.2000s", self.server.name, (message.get("params") or {}).get("data"))
            return
        request_id = message.get("id")
        if isinstance(request_id, str) and request_id.isdigit():
            request_id = int(request_id)  # an id echoed as a string
        answer = self._pending.get(request_id)  # type: ignore[arg-type]  # any id: one we never sent finds nothing
        if answer is None or answer.done():
            return  # the answer to a request given up on
        error = message.get("error")
        if error is not None:
            error = error if isinstance(error, dict) else {}
            answer.set_exception(_Answered(error.get("code"), str(error.get("message", ""))[:2000]))
        else:
            answer.set_result(message.get("result"))

    def _answer(self, request_id: Any, method: str) -> None:
        """A request from the server: `ping` is answered, the rest is not offered by this client."""
        if method == "ping":
            self._send({"jsonrpc": "2.0", "id": request_id, "result": {}})
        else:
            self._send(
                {
                    "jsonrpc": "2.0",
                    "id": request_id,
                    "error": {"code": METHOD_NOT_FOUND, "message": f"this client does not offer {method}"},
                }
            )

    async def _log_stderr(self) -> None:
        assert self.process is not None and self.process.stderr is not None
        while True:
            try:
                line = await self.process.stderr.readline()
            except ValueError:
                continue  # an endless line: skip what was read
            if not line:
                return
            text = line.decode("utf-8", "replace").rstrip()[:STDERR_LINE_CHARS]
            self.stderr_tail = [*self.stderr_tail, text][-STDERR_KEPT_LINES:]
            log.info("MCP server %s: %s", self.server.name, text)


async def _stop(process: asyncio.subprocess.Process) -> None:
    """Close stdin, give it EXIT_GRACE_S, then SIGTERM and SIGKILL its process group."""
    if process.stdin is not None:
        with suppress(OSError):
            process.stdin.close()
    for sig in (None, signal.SIGTERM, signal.SIGKILL):
        if sig is not None:
            with suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, sig)
        try:
            await asyncio.wait_for(process.wait(), EXIT_GRACE_S)
            return
        except TimeoutError:
            continue
    log.warning("MCP server process %d is still alive after SIGKILL; abandoning it", process.pid)


def _parsed(line: bytes) -> Any:
    """A line as JSON (None when it is not JSON: `_receive` logs and skips it)."""
    try:
        return json.loads(line)
    except ValueError:
        return None
