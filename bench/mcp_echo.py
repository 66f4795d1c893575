"""The bench's MCP server (stdio, the official SDK): `echo`, the twin of bench.plugin's `bench_echo`."""

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("bench")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def echo(text: str) -> str:
    """Return the text (a fast read-only tool)."""
    return f"echo {text}"


if __name__ == "__main__":
    server.run()
