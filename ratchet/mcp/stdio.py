"""The stdio transport of MCP servers this worker starts: newline-delimited JSON-RPC over a
subprocess's stdin and stdout.

Ours rather than the SDK's `stdio_client` for three reasons: the SDK re-joins its read buffer for
every chunk of a line, so a 20 MB result took 13 s (here 0.4 s: asyncio's `readline`); a line over
`McpServer.max_message_bytes` must end the connection rather than the worker's memory; and the
server's stderr goes to the worker's log (redacted there) line by line, not to the raw stderr.
Shutdown follows the MCP spec's order: close stdin, wait, then SIGTERM and SIGKILL to the
server's process group, every wait bounded and shielded from cancellation.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

from ratchet.mcp.config import McpConfigError, McpServer

log = logging.getLogger("ratchet.mcp")

EXIT_GRACE_S = 0.5
"""After stdin closes, how long the server may take to exit before SIGTERM (then as long to SIGKILL)."""
STDERR_LINE_CHARS = 2000
STDERR_KEPT_LINES = 5


@dataclass
class StdioProcess:
    """What the pool knows about the program behind a connection."""

    process: asyncio.subprocess.Process | None = None
    ended: str | None = None
    """Why the connection ended on the server's side (exited, a message too large), once it has."""
    stderr_tail: list[str] = field(default_factory=list)
    """Its last lines of stderr (for the error when it dies at start)."""

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.returncode is None and self.ended is None

    def exit_story(self) -> str:
        code = self.process.returncode if self.process is not None else None
        said = f"; its last stderr: {' | '.join(self.stderr_tail)}" if self.stderr_tail else ""
        return f"{self.ended or 'exited'}{'' if code is None else f' (exit code {code})'}{said}"


@asynccontextmanager
async def stdio_transport(server: McpServer, env: dict[str, str], state: StdioProcess) -> AsyncIterator[tuple]:
    """Start `server.command` and yield the (read, write) streams an MCP `Client` takes."""
    import anyio
    from mcp.client.stdio import get_default_environment
    from mcp.shared.message import SessionMessage
    from mcp_types import jsonrpc_message_adapter

    assert server.command is not None
    try:
        process = await asyncio.create_subprocess_exec(
            server.command, *server.args, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, env=get_default_environment() | env, cwd=server.cwd,
            limit=server.max_message_bytes, start_new_session=True,
        )
    except (FileNotFoundError, PermissionError, NotADirectoryError) as exc:
        raise McpConfigError(f"MCP server {server.name!r}: cannot start {server.command!r}: {exc.strerror or exc}") from None
    state.process = process
    read_send, read_receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_send, write_receive = anyio.create_memory_object_stream[SessionMessage](0)

    async def read_stdout() -> None:
        assert process.stdout is not None
        async with read_send:
            while True:
                try:
                    line = await process.stdout.readline()
                except ValueError:  # no newline within the limit
                    state.ended = f"sent a message over {server.max_message_bytes:,} bytes"
                    return
                if not line:
                    state.ended = state.ended or "exited"
                    return
                if not line.strip():
                    continue
                try:
                    message: Any = SessionMessage(jsonrpc_message_adapter.validate_json(line, by_name=False))
                except ValueError as exc:
                    message = exc
                try:
                    await read_send.send(message)
                except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                    return

    async def write_stdin() -> None:
        assert process.stdin is not None
        async with write_receive:
            async for message in write_receive:
                data = message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                try:
                    process.stdin.write(data.encode("utf-8"))
                    await process.stdin.drain()
                except (BrokenPipeError, ConnectionResetError):
                    return  # it died: the reader sees the end of its stdout

    async def log_stderr() -> None:
        assert process.stderr is not None
        while True:
            try:
                line = await process.stderr.readline()
            except ValueError:
                continue  # an endless line: skip what was read
            if not line:
                return
            text = line.decode("utf-8", "replace").rstrip()[:STDERR_LINE_CHARS]
            state.stderr_tail = [*state.stderr_tail, text][-STDERR_KEPT_LINES:]
            log.info("MCP server %s: %s", server.name, text)

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(read_stdout)
        tasks.start_soon(write_stdin)
        tasks.start_soon(log_stderr)
        try:
            yield read_receive, write_send
        finally:
            with anyio.CancelScope(shield=True):
                await _stop(process)
            tasks.cancel_scope.cancel()


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
        except asyncio.TimeoutError:
            continue
    log.warning("MCP server process %d is still alive after SIGKILL; abandoning it", process.pid)
