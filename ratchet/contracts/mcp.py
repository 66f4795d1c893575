"""What a profile takes from an MCP server (`McpToolset`) and how a call of one is undone
(`Compensation`): data of the profile and the run's plan, pydantic and the standard library only.
The servers themselves (`McpServer`, the worker's deployment) are in ratchet/mcp/config.py."""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from ratchet.contracts.base import EffectClass, Strict

SERVER_NAME = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$"
"""A server's name: in activity types (`mcp.<name>`) and in the names the model sees (`<name>__<tool>`)."""


class Compensation(Strict):
    """The MCP tool that undoes a call of another on the same server, e.g. `create_issue` undone by
    `close_issue` with `{"id": "$result.id"}`."""

    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    """The compensating call's arguments. A string value `$arguments.PATH` is taken from the
    forward call's arguments, `$result.PATH` from its structured result (PATH: keys and list
    indices joined by dots; `$result` alone: the whole result); any other value is sent as written."""

    def needs_result(self) -> bool:
        return any(isinstance(v, str) and (v == "$result" or v.startswith("$result.")) for v in self.arguments.values())


class McpToolset(Strict):
    """The tools a profile takes from one server, and what their annotations cannot decide.

    Effects: `readOnlyHint: true` makes a tool read_only, anything else irreversible (so approval
    rules apply); `effects` overrides either, and a `compensations` entry makes a tool compensable
    (undone by its compensating tool in rollback, fork and failure policies)."""

    server: str = Field(pattern=SERVER_NAME)
    tools: list[str] | None = None
    """Tools (their names on the server) the model gets; None: every tool the server lists."""
    effects: dict[str, EffectClass] = Field(default_factory=dict)
    """Effect class per tool, overriding its annotations (compensable needs a `compensations` entry)."""
    idempotent: list[str] = Field(default_factory=list)
    """Tools safe to repeat after an interrupted call (as `idempotentHint: true` says); the others'
    interrupted calls are outcome-unknown: never retried blindly."""
    compensations: dict[str, Compensation] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _consistent(self) -> McpToolset:
        for tool, effect in self.effects.items():
            if effect == EffectClass.COMPENSABLE and tool not in self.compensations:
                raise ValueError(f"effects: {tool} is compensable but has no compensations entry")
            if tool in self.compensations and effect != EffectClass.COMPENSABLE:
                raise ValueError(f"effects: {tool} has a compensation, so it is compensable, not {effect}")
        return self
