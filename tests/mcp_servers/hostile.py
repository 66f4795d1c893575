"""A hostile MCP server, for tests (the official SDK's low-level `Server`): it crashes mid-call,
hangs, answers 20 MB, breaks its own output schema, reports errors, sends an image, asks the client
back (ping, roots/list) in the middle of a call, and lists
whatever the file HOSTILE_LIST says (`v1`, `v2`; `many` adds 500 tools), so its tool list changes
between two runs. stdio only.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import os
import warnings
from pathlib import Path

import anyio
import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPDeprecationWarning

warnings.simplefilter("ignore", MCPDeprecationWarning)  # roots and logging, asked for on purpose

PNG = base64.b64encode(bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)).decode()
BIG_CHARS = 20 * 1024 * 1024
OBJECT = {"type": "object", "properties": {}}


def tool(name: str, description: str, **extra) -> types.Tool:
    return types.Tool(name=name, description=description, input_schema=extra.pop("input_schema", OBJECT), **extra)


def listing() -> list[types.Tool]:
    version = Path(os.environ["HOSTILE_LIST"]).read_text().strip() if "HOSTILE_LIST" in os.environ else "v1"
    tools = [
        tool("crash_once", "Exits mid-call at the first call of each idempotency key, then answers."),
        tool("hang", "Never answers.", annotations=types.ToolAnnotations(read_only_hint=True)),
        tool("big", "Answers 20 MB of text.", annotations=types.ToolAnnotations(read_only_hint=True)),
        tool("bad_schema", "Breaks its own output schema.", annotations=types.ToolAnnotations(read_only_hint=True),
             output_schema={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}),
        tool("fail", "Reports an error.", annotations=types.ToolAnnotations(read_only_hint=True)),
        tool("picture", "Sends an image.", annotations=types.ToolAnnotations(read_only_hint=True)),
        tool("environment", "Names the variables it was started with.", annotations=types.ToolAnnotations(read_only_hint=True)),
        tool("ask_back", "Pings the client, asks it for its roots and logs a line, then answers.",
             annotations=types.ToolAnnotations(read_only_hint=True)),
        tool("old_tool" if version.startswith("v1") else "new_tool", f"Listed in {version}.",
             annotations=types.ToolAnnotations(read_only_hint=True)),
    ]
    if version.endswith("many"):
        tools += [tool(f"extra_{i:03d}", f"Extra tool {i}.", annotations=types.ToolAnnotations(read_only_hint=True))
                  for i in range(500)]
    return tools


async def list_tools(ctx, params) -> types.ListToolsResult:
    return types.ListToolsResult(tools=listing())


def text(value: str, error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=value)], is_error=error)


async def call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
    name = params.name
    if name == "crash_once":  # once per idempotency key: the retry of the same call survives
        key = (params.meta or {}).get("ratchet/idempotency-key", "")
        marker = Path(os.environ["HOSTILE_MARKERS"]) / hashlib.sha256(key.encode()).hexdigest()[:16]
        if not marker.exists():
            marker.write_text(key)
            os._exit(9)
        return text("survived")
    if name == "hang":
        await asyncio.sleep(3600)
    if name == "big":
        return text("x" * BIG_CHARS)
    if name == "bad_schema":
        return types.CallToolResult(content=[types.TextContent(type="text", text="n is a word")], structured_content={"n": "one"})
    if name == "fail":
        return text("the widget is on fire", error=True)
    if name == "picture":
        return types.CallToolResult(content=[types.TextContent(type="text", text="a red pixel:"),
                                             types.ImageContent(type="image", data=PNG, mime_type="image/png")])
    if name == "environment":
        return text(" ".join(sorted(os.environ)))
    if name == "ask_back":  # requests and a notification from the server while a call is open
        await ctx.session.send_ping()
        try:
            await ctx.session.list_roots()
            roots = "answered"
        except Exception as exc:  # noqa: BLE001 - what the client said is the answer
            roots = f"refused ({exc})"
        await ctx.session.send_log_message(level="info", data="a line the server logged")
        return text(f"ping answered; roots/list {roots}")
    return text(f"{name} ran")


server = Server("hostile", on_list_tools=list_tools, on_call_tool=call_tool)


async def main() -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
