"""The worker's MCP connections against real server processes (tests/mcp_servers/hostile.py): a
call that hangs or a message too large interrupts the call, stops the server and starts a new one at
the next use; a server that is down, or a variable its configuration names that the worker lacks, is
a clear error naming the server. (Closing on a worker's drain: tests/test_mcp_runs.py.)"""

from __future__ import annotations

import os

import pytest

from devtools.devserver import free_port
from ratchet.mcp.config import McpConfigError, McpServer
from ratchet.mcp.pool import McpInterrupted, McpPool, McpUnavailable
from tests.mcp_servers import HOSTILE, PYTHON


def running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_hang_and_oversize_interrupt_the_call_and_restart_the_server():
    pool = McpPool([McpServer(name="h", command=PYTHON, args=[str(HOSTILE)], max_message_bytes=1024 * 1024)])
    pids = []
    async with pool.session("h") as session:
        pids.append(session.connection.process.process.pid)
        assert (await session.call("fail", {}, "key-1", timeout_s=20)).is_error
        with pytest.raises(McpInterrupted, match="MCP server 'h': hang was interrupted: no answer in 0.9s"):
            await session.call("hang", {}, "key-2", timeout_s=1.0)
    async with pool.session("h") as session:
        pids.append(session.connection.process.process.pid)
        with pytest.raises(McpInterrupted, match="big was interrupted: the server sent a message over 1,048,576 bytes"):
            await session.call("big", {}, "key-3", timeout_s=20)
    assert pids[0] != pids[1] and pool.starts["h"] == 2
    assert not any(running(pid) for pid in pids), "an interrupted server's process is stopped"
    await pool.aclose()


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
