"""`McpPool`: this worker's connections to its MCP servers, one per server.

- **Lazily started.** A server is started (stdio) or connected (streamable HTTP) at its first use,
  by the first activity that needs it; the others wait for that start.
- **Restarted after a crash.** A stdio server that exited, a connection that closed under a call,
  and a call that got no answer in time make the connection dead; the next use starts a new one.
- **Bounded.** At most `McpServer.max_concurrent` calls per server at once from this worker.
- **Closed on drain.** `aclose` ends every connection (RatchetPlugin.run_worker calls it when the
  worker stops); a later use starts them again.

A connection is a `StdioConnection` (ratchet/mcp/stdio.py: the program, and our own JSON-RPC
client) or an `HttpConnection` (ratchet/mcp/http.py: the SDK's client); both raise the errors of
ratchet/mcp/errors.py, classified on purpose.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from typing import Any

from ratchet.mcp.config import KEY_META, McpConfigError, McpServer
from ratchet.mcp.errors import McpInterrupted, McpRefused, McpUnavailable
from ratchet.mcp.http import HttpConnection
from ratchet.mcp.stdio import StdioConnection

Connection = StdioConnection | HttpConnection

__all__ = ["Connection", "McpInterrupted", "McpPool", "McpRefused", "McpSession", "McpUnavailable"]

log = logging.getLogger("ratchet.mcp")

MAX_LIST_PAGES = 100
"""`tools/list` pages read per server (a paginator that never ends cannot hang planning)."""
ANSWER_SHARE = 0.9
"""A call waits for its answer this share of its timeout, so it ends (and the connection is
restarted) before Temporal's start-to-close timeout does."""


class McpPool:
    """One connection per configured server, for this worker (see the module docstring)."""

    def __init__(self, servers: Iterable[McpServer] = (), environ: Mapping[str, str] | None = None) -> None:
        self.servers: dict[str, McpServer] = {}
        for server in servers:
            if server.name in self.servers:
                raise McpConfigError(f"MCP server {server.name!r} is configured twice")
            self.servers[server.name] = server
        self._environ = environ
        self._connections: dict[str, Connection] = {}
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

    async def announce(self, log: logging.Logger, timeout_s: float = 30.0) -> dict[str, int | None]:
        """List every server's tools once and log how many (a worker's start): name -> count, None
        where the server could not list them (a WARNING with the reason; runs that need it fail
        then, naming it). The connections stay open for the runs."""

        async def count(name: str) -> int | None:
            try:
                async with asyncio.timeout(timeout_s):
                    tools = await self.list_tools(name)
            except Exception as exc:  # any failure is reported, none stops the worker
                log.warning("mcp server %s: could not list its tools: %s", name, str(exc) or type(exc).__name__)
                return None
            names = ", ".join(str(t.get("name")) for t in tools[:20]) + (", ..." if len(tools) > 20 else "")
            log.info("mcp server %s (%s): %d tools: %s", name, self.servers[name].transport, len(tools), names)
            return len(tools)

        counts = await asyncio.gather(*(count(name) for name in self.servers))
        return dict(zip(self.servers, counts))

    async def aclose(self) -> None:
        """End every connection (stdio servers are stopped); later uses start them again."""
        connections, self._connections = list(self._connections.values()), {}
        await asyncio.gather(*(c.close() for c in connections))

    async def _connection(self, server: McpServer) -> Connection:
        lock = self._locks.setdefault(server.name, asyncio.Lock())
        async with lock:
            current = self._connections.get(server.name)
            if current is not None and current.alive:
                return current
            if current is not None:
                log.warning("MCP server %s: connection lost (%s); starting a new one", server.name, current.story())
                await current.close()
            environ = os.environ if self._environ is None else self._environ
            connection: Connection
            if server.transport == "stdio":
                connection = StdioConnection(server, server.resolved_env(environ))
            else:
                connection = HttpConnection(server, environ)
            self.starts[server.name] = self.starts.get(server.name, 0) + 1
            await connection.open()
            self._connections[server.name] = connection
            return connection

    async def discard(self, connection: Connection) -> None:
        """Close `connection` if it is still the server's current one (the next use starts anew)."""
        if self._connections.get(connection.server.name) is connection:
            del self._connections[connection.server.name]
        await connection.close()


class McpSession:
    """One use of a server's connection (`McpPool.session`)."""

    def __init__(self, pool: McpPool, connection: Connection) -> None:
        self.pool = pool
        self.connection = connection
        self.server = connection.server

    async def call(self, tool: str, arguments: dict[str, Any], key: str, timeout_s: float) -> Any:
        """`tools/call` with the idempotency key in `_meta`; the SDK's `CallToolResult`. A call
        interrupted, or a server found unavailable, ends the connection (the next use starts anew)."""
        try:
            return await self.connection.call_tool(tool, arguments, {KEY_META: key}, timeout_s * ANSWER_SHARE)
        except (McpInterrupted, McpUnavailable):
            await self.pool.discard(self.connection)
            raise

    async def list_tools(self) -> list[dict[str, Any]]:
        """Every tool the server lists (all pages, at most MAX_LIST_PAGES), as JSON."""
        listed: list[dict[str, Any]] = []
        cursor = None
        try:
            async with asyncio.timeout(self.server.startup_timeout_s):
                for _ in range(MAX_LIST_PAGES):
                    page = await self.connection.list_tools_page(cursor)
                    listed += [t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in page.tools]
                    cursor = page.next_cursor
                    if cursor is None:
                        break
        except TimeoutError:
            await self.pool.discard(self.connection)
            raise McpUnavailable(
                f"MCP server {self.server.name!r} did not list its tools in {self.server.startup_timeout_s:g}s"
            ) from None
        except McpUnavailable:
            await self.pool.discard(self.connection)
            raise
        return listed
