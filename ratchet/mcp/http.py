"""A streamable-HTTP MCP server, spoken to through the `mcp` SDK's `Client` (sessions, SSE answers,
resumption and auth are the SDK's).

The `Client` runs inside a task of its own per connection (its task groups must be entered and
left by one task); activities send their requests through it from theirs. A `tools/call` whose
connection was refused certainly did not reach the server: it is reported as unavailable (retried),
not as a call whose outcome is unknown.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from ratchet.mcp.config import KEY_META, McpConfigError, McpServer
from ratchet.mcp.errors import McpInterrupted, McpRefused, McpUnavailable, not_valid

log = logging.getLogger("ratchet.mcp")

CLOSE_TIMEOUT_S = 10.0
PERMANENT_HTTP = frozenset({400, 401, 403, 404, 405, 410})
"""Statuses of a handshake that a retry will not change: the url or the credentials are wrong."""


class HttpConnection:
    """One session with an HTTP server, held open by a task of its own until `close`."""

    def __init__(self, server: McpServer, environ: Mapping[str, str]) -> None:
        self.server = server
        self.environ = environ
        self.client: Any = None
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
        return (
            self._task is not None and not self._task.done() and not self._closing.is_set() and self.client is not None
        )

    def story(self) -> str:
        return "the connection closed"

    async def open(self) -> None:
        """Connect and hand-shake, or raise McpConfigError / McpUnavailable naming the server."""
        self._task = asyncio.create_task(self._hold(), name=f"mcp server {self.server.name}")
        try:
            async with asyncio.timeout(self.server.startup_timeout_s):
                await self._ready.wait()
        except TimeoutError:
            await self.close()
            raise McpUnavailable(
                f"MCP server {self.server.name!r} did not start and hand-shake in {self.server.startup_timeout_s:g}s"
            ) from None
        if self.client is None:
            await self.close()
            raise self._failure(self._error)

    async def close(self) -> None:
        self._closing.set()
        if self._task is not None and not self._task.done():
            try:
                await asyncio.wait_for(asyncio.shield(self._task), CLOSE_TIMEOUT_S)
            except TimeoutError:
                self._task.cancel()

    async def call_tool(self, tool: str, arguments: dict[str, Any], meta: dict[str, Any], timeout_s: float) -> Any:
        """`tools/call`; the SDK's `CallToolResult`."""
        import mcp_types as types
        from mcp.shared.exceptions import MCPError
        from pydantic import ValidationError

        request = types.CallToolRequest(params=types.CallToolRequestParams(name=tool, arguments=arguments, _meta=meta))
        try:
            return await self.client.session.send_request(
                request, types.CallToolResult, request_read_timeout_seconds=timeout_s
            )
        except MCPError as exc:
            key = meta.get(KEY_META)
            if key in self.refused_keys:  # the HTTP request never left: nothing acted
                self.refused_keys.discard(key)
                raise McpUnavailable(f"MCP server {self.server.name!r} at {self.server.url} is unreachable") from None
            if exc.code == types.CONNECTION_CLOSED:
                raise McpInterrupted(
                    f"MCP server {self.server.name!r}: {tool} was interrupted: {self.story()}"
                ) from None
            if exc.code == types.REQUEST_TIMEOUT:
                raise McpInterrupted(
                    f"MCP server {self.server.name!r}: {tool} was interrupted: no answer in {timeout_s:g}s"
                ) from None
            raise McpRefused(f"the server answered with error {exc.code}: {exc.message}") from None
        except ValidationError as exc:
            raise not_valid("tool result", exc) from None

    async def list_tools_page(self, cursor: str | None) -> Any:
        """One page of `tools/list`: the SDK's `ListToolsResult`."""
        import mcp_types as types
        from mcp.shared.exceptions import MCPError
        from pydantic import ValidationError

        try:
            return await self.client.session.list_tools(params=types.PaginatedRequestParams(cursor=cursor))
        except MCPError as exc:
            raise McpUnavailable(f"MCP server {self.server.name!r} did not list its tools: {exc}") from None
        except ValidationError as exc:
            raise McpConfigError(f"MCP server {self.server.name!r}: {not_valid('tool list', exc)}") from None

    async def _hold(self) -> None:
        from mcp import Client
        from mcp_types import Implementation

        try:
            async with Client(
                self._transport(), cache=None, client_info=Implementation(name="ratchet", version="1")
            ) as client:
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
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        async def remember(response: Any) -> None:
            self.http_status = response.status_code

        client = httpx2.AsyncClient(
            headers=self.server.resolved_headers(self.environ),
            event_hooks={"response": [remember]},
            timeout=httpx2.Timeout(self.server.startup_timeout_s, read=self.server.timeout_s),
            transport=_refusal_tracker(httpx2.AsyncHTTPTransport(), self.refused_keys),
        )
        return streamable_http_client(self.server.url or "", http_client=client)

    def _failure(self, error: BaseException | None) -> Exception:
        """What a failed start means: McpConfigError (will recur) or McpUnavailable (try again)."""
        leaf = _leaf(error) if error is not None else None
        if isinstance(leaf, McpConfigError):
            return leaf
        name, status = self.server.name, self.http_status
        if status in PERMANENT_HTTP:
            return McpConfigError(
                f"MCP server {name!r} at {self.server.url} answered HTTP {status} to the handshake:"
                " check its url and headers"
            )
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
