"""The bench's MCP server (stdio, the official SDK's `MCPServer`): `echo`, the twin of bench.plugin's
`bench_echo`. Both are `async def`: the SDK runs a plain `def` tool in a worker thread (a thread hop
per call that the `@tool` twin does not pay)."""

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("bench")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
async def echo(text: str) -> str:
    """Return the text (a fast read-only tool)."""
    return f"echo {text}"


if __name__ == "__main__":
    server.run()
