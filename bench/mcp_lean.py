"""The bench's lean MCP server (stdio, no SDK): `echo`, the twin of bench.plugin's `bench_echo` and
of bench/mcp_echo.py's, answering in tens of microseconds, as a compiled or hand-tuned server would.

It speaks what a client of the stdio transport needs: `initialize` (the client's protocol version if
it is one of the handshake versions, else the latest), `ping`, `tools/list` (input and output schema,
`readOnlyHint`), `tools/call` (text and structured content, as the SDK's `MCPServer` answers); other
requests get "method not found", notifications are read and dropped. With it, bench/mcp_calls.py
prices what Ratchet adds to an MCP call (client, activity, the hop to another process), apart from
what a server framework spends on its own.
"""

from __future__ import annotations

import asyncio
import json
import sys

VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
ECHO = {
    "name": "echo", "description": "Return the text (a fast read-only tool).",
    "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    "outputSchema": {"type": "object", "properties": {"result": {"type": "string"}}, "required": ["result"]},
    "annotations": {"readOnlyHint": True},
}


def answer(message: dict) -> dict | None:
    method, params = message.get("method"), message.get("params") or {}
    if "id" not in message:
        return None  # a notification
    reply: dict = {"jsonrpc": "2.0", "id": message["id"]}
    if method == "initialize":
        asked = params.get("protocolVersion")
        reply["result"] = {"protocolVersion": asked if asked in VERSIONS else VERSIONS[-1], "capabilities": {"tools": {}},
                           "serverInfo": {"name": "bench-lean", "version": "1"}}
    elif method == "ping":
        reply["result"] = {}
    elif method == "tools/list":
        reply["result"] = {"tools": [ECHO]}
    elif method == "tools/call" and params.get("name") == "echo":
        text = f"echo {(params.get('arguments') or {}).get('text', '')}"
        reply["result"] = {"content": [{"type": "text", "text": text}], "structuredContent": {"result": text}, "isError": False}
    elif method == "tools/call":
        reply["error"] = {"code": -32602, "message": f"unknown tool {params.get('name')!r}"}
    else:
        reply["error"] = {"code": -32601, "message": f"method not found: {method}"}
    return reply


async def main() -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=64 * 1024 * 1024)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    writer, _ = await loop.connect_write_pipe(asyncio.Protocol, sys.stdout)
    while line := await reader.readline():
        reply = answer(json.loads(line))
        if reply is not None:
            writer.write((json.dumps(reply) + "\n").encode())


if __name__ == "__main__":
    asyncio.run(main())
