"""A run's pinned MCP tool list: what the servers listed when the run was planned, with the
profile's decisions applied (effect, idempotency, compensation) and the name the model sees.

`run.prepare` lists each server the profile uses, builds the `McpCatalog`, stores it once in the
artifact store and records its digest in the plan (`RunPlan.mcp_ref`); every `mcp.<server>` call of
the run names that digest, so a call never depends on what a server lists today, and a server
that changes its tools between two runs cannot change a running one.
"""

from __future__ import annotations

import logging
from typing import Any

from pydantic import BaseModel, Field

from ratchet.contracts import EffectClass, ToolSchema, ToolSpec
from ratchet.mcp.config import Compensation, McpConfigError, McpServer, McpToolset, public_name

log = logging.getLogger("ratchet.mcp")

MAX_DESCRIPTION_CHARS = 4096
"""A listed description beyond this is cut (what a server says goes into every model request)."""


class McpTool(BaseModel):
    """One MCP tool as a run pinned it."""

    name: str
    """The name the model sees (`config.public_name`)."""
    server: str
    tool: str
    """Its name on the server."""
    description: str = ""
    input_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object"})
    output_schema: dict[str, Any] | None = None
    annotations: dict[str, Any] = Field(default_factory=dict)
    """As the server listed them (`readOnlyHint`, `destructiveHint`, `idempotentHint`, ...)."""
    effect: EffectClass = EffectClass.IRREVERSIBLE
    idempotent: bool = False
    compensation: Compensation | None = None

    def tool_schema(self) -> ToolSchema:
        return ToolSchema(name=self.name, description=self.description, parameters=self.input_schema)

    def spec(self, server: McpServer) -> ToolSpec:
        return ToolSpec(
            name=self.name,
            effect=self.effect,
            timeout_s=server.timeout_s,
            max_attempts=server.max_attempts,
            has_undo=self.compensation is not None,
            mcp=server.name,
        )


class McpCatalog(BaseModel):
    tools: list[McpTool] = Field(default_factory=list)

    def get(self, name: str) -> McpTool | None:
        return next((t for t in self.tools if t.name == name), None)


def pin(toolset: McpToolset, listed: list[dict[str, Any]]) -> list[McpTool]:
    """The toolset's tools from a server's listing (`tools/list` entries as JSON, camelCase keys).
    Raises McpConfigError when the profile names a tool the server does not list."""
    by_name: dict[str, dict[str, Any]] = {}
    for entry in listed:
        name = entry.get("name")
        if not isinstance(name, str) or not name or name in by_name:
            log.warning(
                "MCP server %r lists a tool without a usable name, or twice: %.80r (left out)", toolset.server, name
            )
            continue
        by_name[name] = entry
    named = set(toolset.tools or []) | set(toolset.effects) | set(toolset.idempotent) | set(toolset.compensations)
    named |= {c.tool for c in toolset.compensations.values()}
    missing = sorted(named - set(by_name))
    if missing:
        raise McpConfigError(
            f"MCP server {toolset.server!r} does not list {', '.join(missing)} (the profile names them)"
        )
    chosen = toolset.tools if toolset.tools is not None else list(by_name)
    return [_pinned(toolset, by_name[name]) for name in chosen]


def _pinned(toolset: McpToolset, entry: dict[str, Any]) -> McpTool:
    name = entry["name"]
    annotations = entry["annotations"] if isinstance(entry.get("annotations"), dict) else {}
    schema = entry.get("inputSchema")
    if not isinstance(schema, dict) or schema.get("type", "object") != "object":
        log.warning(
            "MCP server %r: tool %r has no object input schema; the model gets an empty one", toolset.server, name
        )
        schema = {"type": "object"}
    output = entry.get("outputSchema")
    compensation = toolset.compensations.get(name)
    if compensation is not None:
        effect = EffectClass.COMPENSABLE
    elif name in toolset.effects:
        effect = toolset.effects[name]
    else:
        effect = EffectClass.READ_ONLY if annotations.get("readOnlyHint") is True else EffectClass.IRREVERSIBLE
    description = entry["description"] if isinstance(entry.get("description"), str) else ""
    return McpTool(
        name=public_name(toolset.server, name),
        server=toolset.server,
        tool=name,
        description=description[:MAX_DESCRIPTION_CHARS],
        input_schema=schema,
        output_schema=output if isinstance(output, dict) else None,
        annotations=annotations,
        effect=effect,
        idempotent=name in toolset.idempotent or annotations.get("idempotentHint") is True,
        compensation=compensation,
    )


def check_names(tools: list[McpTool], taken: set[str]) -> None:
    """Two pinned tools, or a pinned tool and one of the profile's own, with one name."""
    seen = set(taken)
    for tool in tools:
        if tool.name in seen:
            raise McpConfigError(
                f"tool name {tool.name!r} (MCP server {tool.server!r}, tool {tool.tool!r})"
                " is taken twice in the profile"
            )
        seen.add(tool.name)
