"""The bench's two MCP servers (bench/mcp_calls.py) are real MCP servers: the official SDK's client
and Ratchet's own both hand-shake with them, list `echo` with its schemas and read-only annotation,
and get the same answer, so `mcp_call_ratio` prices a true MCP call."""

from __future__ import annotations

import sys

import pytest
from mcp import Client, StdioServerParameters

from bench.mcp_calls import SERVERS
from ratchet.mcp.config import McpServer
from ratchet.mcp.errors import McpRefused
from ratchet.mcp.pool import McpPool

pytestmark = pytest.mark.e2e  # slow: `make test-e2e`, not `make test`

@pytest.mark.parametrize("name", sorted(SERVERS))
async def test_each_bench_server_answers_the_sdk_client_and_ratchets_alike(name):
    spec = SERVERS[name]
    async with Client(StdioServerParameters(command=spec["command"], args=spec["args"])) as sdk:
        listed = (await sdk.list_tools()).tools
        sdk_answer = await sdk.call_tool("echo", {"text": "hi"})
    assert [t.name for t in listed] == ["echo"] and listed[0].annotations.read_only_hint
    assert listed[0].input_schema["required"] == ["text"] and listed[0].output_schema is not None

    pool = McpPool([McpServer(name=name, command=sys.executable, args=spec["args"])])
    try:
        [tool] = await pool.list_tools(name)
        assert tool["name"] == "echo" and tool["annotations"]["readOnlyHint"] is True
        async with pool.session(name) as session:
            answer = await session.call("echo", {"text": "hi"}, "key-1", timeout_s=10)
            try:  # an unknown tool: the spec's protocol error (lean), or a tool error (the SDK's MCPServer)
                assert (await session.call("nope", {}, "key-2", timeout_s=10)).is_error
            except McpRefused as exc:
                assert "error -32602" in str(exc)
    finally:
        await pool.aclose()
    for result in (sdk_answer, answer):
        assert not result.is_error and result.content[0].text == "echo hi" and result.structured_content == {"result": "echo hi"}
