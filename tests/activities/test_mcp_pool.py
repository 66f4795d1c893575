"""The worker's MCP connections against real server processes (tests/mcp_servers/hostile.py): a
call that hangs or a message too large interrupts the call, stops the server and starts a new one at
the next use; closing the pool stops them; a server that is down, or a variable its configuration
names that the worker lacks, is a clear error naming the server. Ratchet's own stdio client:
requests from the server during a call, a handshake that fails, a server with quirks."""

from __future__ import annotations

import asyncio
from typing import Any

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


async def one_call(server: McpServer, tool: str, caplog) -> Any:
    """One call of `tool` on a fresh connection to `server`, the MCP log captured."""
    pool = McpPool([server])
    try:
        with caplog.at_level("INFO", logger="ratchet.mcp"):
            async with pool.session(server.name) as session:
                return await session.call(tool, {}, f"key-{tool}", timeout_s=20)
    finally:
        await pool.aclose()


async def test_the_server_may_ask_back_during_a_call(caplog):
    """Ratchet's stdio client answers a server's `ping`, refuses what it does not offer (roots,
    sampling, elicitation) with "method not found", and logs the server's log notifications."""
    result = await one_call(McpServer(name="asker", command=PYTHON, args=[str(HOSTILE)]), "ask_back", caplog)
    assert result.content[0].text == "ping answered; roots/list refused (this client does not offer roots/list)"
    assert "MCP server asker says: a line the server logged" in caplog.text


ANSWERS_WITH = """import json, sys
line = sys.stdin.readline()
print(json.dumps({"jsonrpc": "2.0", "id": json.loads(line)["id"], "result": %s}), flush=True)
sys.stdin.read()
"""


@pytest.mark.parametrize("script, error, says", [
    (ANSWERS_WITH % '{"protocolVersion": "1999-01-01", "capabilities": {}, "serverInfo": {"name": "x", "version": "0"}}',
     McpConfigError, r"MCP server 'odd' answered the handshake with protocol version '1999-01-01'; this worker speaks 2024-11-05, "),
    ("import sys; print('no config file here', file=sys.stderr); sys.exit(3)",
     McpUnavailable, r"MCP server 'odd' \(.*\) exited \(exit code 3\); its last stderr: no config file here during its start"),
])
async def test_a_server_that_fails_its_handshake_is_named(script, error, says):
    pool = McpPool([McpServer(name="odd", command=PYTHON, args=["-c", script], startup_timeout_s=10)])
    try:
        with pytest.raises(error, match=says):
            await pool.list_tools("odd")
    finally:
        await pool.aclose()


QUIRKY = """import json, sys
def send(message): print(json.dumps(message), flush=True)
hello = json.loads(sys.stdin.readline())
send({"jsonrpc": "2.0", "id": str(hello["id"]), "result": {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                                                           "serverInfo": {"name": "quirky", "version": "0"}}})
json.loads(sys.stdin.readline())  # notifications/initialized
call = json.loads(sys.stdin.readline())
print("a banner a library printed", flush=True)
send({"jsonrpc": "2.0", "id": 999, "result": {}})
send([{"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "batched"}},
      {"jsonrpc": "2.0", "id": call["id"], "result": {"content": [{"type": "text", "text": "odd but fine"}]}}])
sys.stdin.read()
"""


async def test_a_quirky_server_is_understood(caplog):
    """An id echoed as a string, a line that is not JSON-RPC (logged, skipped), an answer to a
    request never sent (dropped), and a batch (protocol 2025-03-26) holding the answer."""
    result = await one_call(McpServer(name="quirky", command=PYTHON, args=["-c", QUIRKY], startup_timeout_s=10), "anything", caplog)
    assert result.content[0].text == "odd but fine"
    assert "MCP server quirky sent a line that is not a JSON-RPC message: b'a banner a library printed\\n'" in caplog.text
    assert "MCP server quirky says: batched" in caplog.text
