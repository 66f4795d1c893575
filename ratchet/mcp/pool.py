"""`McpPool`: this worker's connections to its MCP servers, one per server.

- **Lazily started.** A server is started (stdio) or connected (streamable HTTP) at its first use,
  by the first activity that needs it; the others wait for that start.
- **Restarted after a crash.** A stdio server that exited, a connection that closed under a call,
  and a call that got no answer in time make the connection dead; the next use starts a new one.
- **Bounded.** At most `McpServer.max_concurrent` calls per server at once from this worker.
- **Closed on drain.** `aclose` ends every connection (RatchetPlugin.run_worker calls it when the
  worker stops); a later use starts them again.

The `mcp` SDK's `Client` runs inside a task of its own per connection (its task groups must be
entered and left by one task); activities send their requests through it from theirs.

Errors, on purpose: `McpConfigError` (ratchet/mcp/config.py) will recur until the configuration
changes; `McpUnavailable` is a server that cannot be reached or started now (retry with backoff);
`McpInterrupted` is a call whose connection broke or that got no answer in time, so it may or may
not have acted; `McpRefused` is a server that answered with an error or with something that is not
a tool result (the model is told).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from typing import Any

from ratchet.mcp.config import KEY_META, McpConfigError, McpServer
from ratchet.mcp.stdio import StdioProcess

log = logging.getLogger("ratchet.mcp")

MAX_LIST_PAGES = 100
"""`tools/list` pages read per server (a paginator that never ends cannot hang planning)."""
ANSWER_SHARE = 0.9
"""A call waits for its answer this share of its timeout, so it ends (and the connection is
restarted) before Temporal's start-to-close timeout does."""
CLOSE_TIMEOUT_S = 10.0
PERMANENT_HTTP = frozenset({400, 401, 403, 404, 405, 410})
"""Statuses of a handshake that a retry will not change: the url or the credentials are wrong."""


class McpUnavailable(Exception):
    """The server cannot be started or reached now; a later attempt may succeed."""


class McpInterrupted(Exception):
    """The connection broke, or no answer came in time, while a call was in flight: it may have acted."""


class McpRefused(Exception):
    """The server answered a call with an error, or with something that is not a tool result."""


class McpPool:
    """One connection per configured server, for this worker (see the module docstring)."""

    def __init__(self, servers: Iterable[McpServer] = (), environ: Mapping[str, str] | None = None) -> None:
        self.servers: dict[str, McpServer] = {}
        for server in servers:
            if server.name in self.servers:
                raise McpConfigError(f"MCP server {server.name!r} is configured twice")
            self.servers[server.name] = server
        self._environ = environ
        self._connections: dict[str, _Connection] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._slots: dict[str, asyncio.Semaphore] = {}
        self.starts: dict[str, int] = {}
        """Connections started per server (a restart counts): for tests and logs."""

    def server(self, name: str) -> McpServer:
        try:
            return self.servers[name]
        except KeyError:
            known = ", ".join(sorted(self.servers)) or "none (RATCHET_MCP_SERVERS is not set)"
            raise McpConfigError(f"unknown MCP server {name!r}; this worker has: {known}") from None

    def secret_variables(self) -> list[str]:
        return sorted({v for s in self.servers.values() for v in s.secret_variables()})

    @asynccontextmanager
    async def session(self, name: str) -> AsyncIterator[McpSession]:
        """A live connection to server `name`, holding one of its call slots."""
        server = self.server(name)
        slots = self._slots.setdefault(name, asyncio.Semaphore(server.max_concurrent))
        async with slots:
            yield McpSession(self, await self._connection(server))

    async def list_tools(self, name: str) -> list[dict[str, Any]]:
        """Every tool server `name` lists now, as JSON (camelCase keys, as on the wire)."""
        async with self.session(name) as session:
            return await session.list_tools()

    async def aclose(self) -> None:
        """End every connection (stdio servers are stopped); later uses start them again."""
        connections, self._connections = list(self._connections.values()), {}
        await asyncio.gather(*(c.close() for c in connections))

    async def _connection(self, server: McpServer) -> _Connection:
        lock = self._locks.setdefault(server.name, asyncio.Lock())
        async with lock:
            current = self._connections.get(server.name)
            if current is not None and current.alive:
                return current
            if current is not None:
                log.warning("MCP server %s: connection lost (%s); starting a new one", server.name, current.story())
                await current.close()
            connection = _Connection(server, os.environ if self._environ is None else self._environ)
            self.starts[server.name] = self.starts.get(server.name, 0) + 1
            await connection.open()
            self._connections[server.name] = connection
            return connection

    async def discard(self, connection: _Connection) -> None:
        """Close `connection` if it is still the server's current one (the next use starts anew)."""
        if self._connections.get(connection.server.name) is connection:
            del self._connections[connection.server.name]
        await connection.close()


class McpSession:
    """One use of a server's connection (`McpPool.session`)."""

    def __init__(self, pool: McpPool, connection: _Connection) -> None:
        self.pool = pool
        self.connection = connection
        self.server = connection.server

    async def call(self, tool: str, arguments: dict[str, Any], key: str, timeout_s: float) -> Any:
        """`tools/call` with the idempotency key in `_meta`; the `CallToolResult`."""
        import mcp_types as types
        from mcp.shared.exceptions import MCPError
        from pydantic import ValidationError

        request = types.CallToolRequest(params=types.CallToolRequestParams(name=tool, arguments=arguments, _meta={KEY_META: key}))
        try:
            return await self.connection.client.session.send_request(
                request, types.CallToolResult, request_read_timeout_seconds=timeout_s * ANSWER_SHARE,
            )
        except MCPError as exc:
            if key in self.connection.refused_keys:  # the HTTP request never left: nothing acted
                self.connection.refused_keys.discard(key)
                await self.pool.discard(self.connection)
                raise McpUnavailable(f"MCP server {self.server.name!r} at {self.server.url} is unreachable") from None
            if exc.code in (types.CONNECTION_CLOSED, types.REQUEST_TIMEOUT):
                story = self.connection.story() if exc.code == types.CONNECTION_CLOSED else f"no answer in {timeout_s * ANSWER_SHARE:g}s"
                await self.pool.discard(self.connection)
                raise McpInterrupted(f"MCP server {self.server.name!r}: {tool} was interrupted: {story}") from None
            raise McpRefused(f"the server answered with error {exc.code}: {exc.message}") from None
        except ValidationError as exc:
            raise McpRefused(f"the server's answer is not a valid tool result: {_first_problem(exc)}") from None

    async def list_tools(self) -> list[dict[str, Any]]:
        import mcp_types as types
        from mcp.shared.exceptions import MCPError

        listed: list[dict[str, Any]] = []
        cursor = None
        try:
            async with asyncio.timeout(self.server.startup_timeout_s):
                for _ in range(MAX_LIST_PAGES):
                    page = await self.connection.client.session.list_tools(params=types.PaginatedRequestParams(cursor=cursor))
                    listed += [t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in page.tools]
                    cursor = page.next_cursor
                    if cursor is None:
                        break
        except (MCPError, TimeoutError) as exc:
            await self.pool.discard(self.connection)
            raise McpUnavailable(f"MCP server {self.server.name!r} did not list its tools: {exc or 'timed out'}") from None
        return listed


class _Connection:
    """One server connection, held open by a task of its own until `close`."""

    def __init__(self, server: McpServer, environ: Mapping[str, str]) -> None:
        self.server = server
        self.environ = environ
        self.client: Any = None
        self.process = StdioProcess()
        self.http_status: int | None = None
        """The last HTTP status the server answered (a handshake refused: 401, 404, ...)."""
        self.refused_keys: set[str] = set()
        """Idempotency keys of calls whose HTTP request could not connect: they never reached the server."""
        self._ready = asyncio.Event()
        self._closing = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._error: BaseException | None = None

    @property
    def alive(self) -> bool:
        if self._task is None or self._task.done() or self._closing.is_set() or self.client is None:
            return False
        return self.server.transport == "http" or self.process.alive

    def story(self) -> str:
        if self.server.transport == "stdio":
            return f"the server {self.process.exit_story()}"
        return "the connection closed"

    async def open(self) -> None:
        """Start and hand-shake, or raise McpConfigError / McpUnavailable naming the server."""
        self._task = asyncio.create_task(self._hold(), name=f"mcp server {self.server.name}")
        try:
            async with asyncio.timeout(self.server.startup_timeout_s):
                await self._ready.wait()
        except TimeoutError:
            await self.close()
            raise McpUnavailable(f"MCP server {self.server.name!r} did not start and hand-shake in {self.server.startup_timeout_s:g}s") from None
        if self.client is None:
            await self.close()
            raise self._failure(self._error)

    async def close(self) -> None:
        self._closing.set()
        if self._task is not None and not self._task.done():
            try:
                await asyncio.wait_for(asyncio.shield(self._task), CLOSE_TIMEOUT_S)
            except (TimeoutError, asyncio.TimeoutError):
                self._task.cancel()

    async def _hold(self) -> None:
        from mcp import Client
        from mcp_types import Implementation

        try:
            transport = self._transport()
            async with Client(transport, cache=None, client_info=Implementation(name="ratchet", version="1")) as client:
                self.client = client
                self._ready.set()
                await self._closing.wait()
        except BaseException as exc:  # noqa: BLE001 - reported by open(), or logged: the task must not die silently
            if self.client is None:
                self._error = exc
            elif not self._closing.is_set():
                log.warning("MCP server %s: connection ended: %s", self.server.name, _leaf(exc))
            if isinstance(exc, asyncio.CancelledError):
                raise
        finally:
            self._ready.set()

    def _transport(self) -> Any:
        if self.server.transport == "stdio":
            from ratchet.mcp.stdio import stdio_transport

            return stdio_transport(self.server, self.server.resolved_env(self.environ), self.process)
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        async def remember(response: Any) -> None:
            self.http_status = response.status_code

        client = httpx2.AsyncClient(
            headers=self.server.resolved_headers(self.environ), event_hooks={"response": [remember]},
            timeout=httpx2.Timeout(self.server.startup_timeout_s, read=self.server.timeout_s),
            transport=_refusal_tracker(httpx2.AsyncHTTPTransport(), self.refused_keys),
        )
        return streamable_http_client(self.server.url or "", http_client=client)

    def _failure(self, error: BaseException | None) -> Exception:
        """What a failed start means: McpConfigError (will recur) or McpUnavailable (try again)."""
        leaf = _leaf(error) if error is not None else None
        name = self.server.name
        if isinstance(leaf, McpConfigError):
            return leaf
        if self.server.transport == "stdio":
            return McpUnavailable(f"MCP server {name!r} ({self.server.command}) {self.process.exit_story()} during its start: {leaf}")
        status = self.http_status
        if status in PERMANENT_HTTP:
            return McpConfigError(f"MCP server {name!r} at {self.server.url} answered HTTP {status} to the handshake: check its url and headers")
        return McpUnavailable(f"MCP server {name!r} at {self.server.url} is unreachable: {type(leaf).__name__}: {leaf}")


def _refusal_tracker(inner: Any, refused: set[str]) -> Any:
    """An httpx transport noting the idempotency key of each `tools/call` whose connection was
    refused: such a call certainly did not act, so it is retried as a server that is down, not
    treated as a call whose outcome is unknown."""
    import json

    import httpx2

    class Tracker(httpx2.AsyncBaseTransport):
        async def handle_async_request(self, request: Any) -> Any:
            try:
                return await inner.handle_async_request(request)
            except httpx2.ConnectError:
                try:
                    key = ((json.loads(request.content).get("params") or {}).get("_meta") or {}).get(KEY_META)
                except (ValueError, AttributeError):
                    key = None
                if isinstance(key, str):
                    refused.add(key)
                raise

        async def aclose(self) -> None:
            await inner.aclose()

    return Tracker()


def _leaf(error: BaseException) -> BaseException:
    """The first exception inside nested exception groups (anyio's task groups wrap them)."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return error


def _first_problem(exc: Any) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"])
    return f"{where}: {first['msg']}" if where else first["msg"]
