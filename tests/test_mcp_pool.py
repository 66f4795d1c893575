"""The worker's MCP connections against real server processes (tests/mcp_servers/hostile.py): a
call that hangs or a message too large interrupts the call, stops the server and starts a new one at
the next use; closing the pool stops them; a server that is down, or a variable its configuration
names that the worker lacks, is a clear error naming the server."""

from __future__ import annotations

import asyncio

import pytest

from devtools.devserver import free_port
from ratchet.mcp.config import McpConfigError, McpServer
from ratchet.mcp.pool import McpInterrupted, McpPool, McpUnavailable
from tests.mcp_servers import HOSTILE, PYTHON, running


async def test_hang_and_oversize_interrupt_the_call_and_restart_the_server():
    small = 1024 * 1024
    pool = McpPool([McpServer(name=n, command=PYTHON, args=[str(HOSTILE)], max_message_bytes=small) for n in ("h1", "h2")])

    async def interrupted(server: str, tool: str, timeout_s: float, says: str) -> tuple[int, int]:
        async with pool.session(server) as session:
            pid = session.connection.process.pid
            with pytest.raises(McpInterrupted, match=f"MCP server '{server}': {tool} was interrupted: {says}"):
                await session.call(tool, {}, f"key-{tool}", timeout_s=timeout_s)
        async with pool.session(server) as session:  # a new process answers
            assert (await session.call("fail", {}, "key-after", timeout_s=20)).is_error
            return pid, session.connection.process.pid

    hung, oversized = await asyncio.gather(
        interrupted("h1", "hang", 1.0, "no answer in 0.9s"),
        interrupted("h2", "big", 20, "the server sent a message over 1,048,576 bytes"),
    )
    assert pool.starts == {"h1": 2, "h2": 2} and hung[0] != hung[1] and oversized[0] != oversized[1]
    assert not running(hung[0]) and not running(oversized[0]), "an interrupted server's process is stopped"
    await pool.aclose()
    assert not running(hung[1]) and not running(oversized[1]), "closing the pool stops the servers"


async def test_a_server_that_is_down_or_misconfigured_is_named():
    down = McpServer(name="down", url=f"http://127.0.0.1:{free_port()}/mcp", startup_timeout_s=5)
    secretive = McpServer(name="secretive", command=PYTHON, args=[str(HOSTILE)], env={"T": "${MCP_POOL_TEST_ABSENT}"})
    pool = McpPool([down, secretive], environ={})
    with pytest.raises(McpUnavailable, match="MCP server 'down' at http://127.0.0.1:.* is unreachable: ConnectError"):
        await pool.list_tools("down")
    with pytest.raises(McpConfigError, match=r"MCP server 'secretive': env T names \$\{MCP_POOL_TEST_ABSENT\}"):
        await pool.list_tools("secretive")
    with pytest.raises(McpConfigError, match="unknown MCP server 'other'; this worker has: down, secretive"):
        await pool.list_tools("other")
    await pool.aclose()
