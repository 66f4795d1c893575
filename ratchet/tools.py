"""Registering typed Python functions as agent tools.

    @tool(effect="compensable", timeout_s=30)
    async def write_file(ctx: ToolContext, args: WriteFileArgs) -> ToolOutput: ...

The argument model's JSON schema is what the model sees; each tool runs as its own Temporal
activity type `tool.<name>`, with the timeout and retry policy declared here.

Errors, on purpose:
- `ToolError`: the call failed in a way the model should see and can react to (file not found,
  path refused). Not retried; returned to the model as the tool's result.
- `FatalToolError`: the run cannot go on (non-retryable); the run's failure policy applies.
- anything else: transient; Temporal retries the activity with the tool's retry policy.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ratchet.artifacts import ArtifactStore
from ratchet.contracts import EffectClass, ToolSpec


class ToolError(Exception):
    """A failure the model sees as the tool's result; not retried."""


class FatalToolError(Exception):
    """A failure that ends the run (its failure policy applies); not retried."""


@dataclass
class ToolContext:
    """What a running tool may use. `key` is stable across retries, worker crashes and
    continue-as-new: pass it to the systems you touch as their idempotency key."""

    key: str
    workflow_id: str
    step: int
    call_id: str
    attempt: int
    workspace: Path
    artifacts: ArtifactStore


@dataclass
class ToolOutput:
    """A tool's result: text for the model, plus what its undo needs."""

    output: str
    undo: dict[str, Any] | None = None


ToolFn = Callable[[ToolContext, Any], Awaitable[Any] | Any]


@dataclass
class Tool:
    name: str
    description: str
    args_model: type[BaseModel]
    fn: ToolFn
    effect: EffectClass = EffectClass.READ_ONLY
    timeout_s: float = 60.0
    max_attempts: int = 5
    idempotent: bool = False
    undo: ToolFn | None = None

    def spec(self) -> ToolSpec:
        return ToolSpec(
            name=self.name,
            effect=self.effect,
            timeout_s=self.timeout_s,
            max_attempts=self.max_attempts,
            idempotent=self.idempotent,
        )

    def openai_schema(self) -> dict[str, Any]:
        schema = self.args_model.model_json_schema()
        schema.pop("title", None)
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": schema},
        }

    async def call(self, ctx: ToolContext, args: BaseModel) -> ToolOutput:
        result = self.fn(ctx, args)
        if inspect.isawaitable(result):
            result = await result
        return result if isinstance(result, ToolOutput) else ToolOutput(output=str(result))


@dataclass
class ToolRegistry:
    tools: dict[str, Tool] = field(default_factory=dict)

    def register(self, tool: Tool) -> Tool:
        existing = self.tools.get(tool.name)
        if existing is not None and _origin(existing.fn) != _origin(tool.fn):
            raise ValueError(f"tool {tool.name!r} is already registered by {_origin(existing.fn)}")
        self.tools[tool.name] = tool
        return tool

    def tool(
        self,
        name: str | None = None,
        *,
        effect: EffectClass | str = EffectClass.READ_ONLY,
        timeout_s: float = 60.0,
        max_attempts: int = 5,
        idempotent: bool = False,
    ) -> Callable[[ToolFn], ToolFn]:
        """Decorator: register `fn(ctx, args: SomeModel)`; the description is its docstring."""

        def register(fn: ToolFn) -> ToolFn:
            self.register(
                Tool(
                    name=name or fn.__name__,
                    description=inspect.cleandoc(fn.__doc__ or ""),
                    args_model=_args_model(fn),
                    fn=fn,
                    effect=EffectClass(effect),
                    timeout_s=timeout_s,
                    max_attempts=max_attempts,
                    idempotent=idempotent,
                )
            )
            return fn

        return register

    def undo_for(self, name: str) -> Callable[[ToolFn], ToolFn]:
        """Decorator: `undo(ctx, args, undo_info: dict)` compensates a call of tool `name`."""

        def register(fn: ToolFn) -> ToolFn:
            self.tools[name].undo = fn
            return fn

        return register

    def get(self, name: str) -> Tool:
        return self.tools[name]


def _origin(fn: ToolFn) -> str:
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', '?')}"


def _args_model(fn: ToolFn) -> type[BaseModel]:
    hints = inspect.get_annotations(fn, eval_str=True)
    params = list(inspect.signature(fn).parameters)
    if len(params) != 2:
        raise TypeError(f"tool {fn.__name__} must take (ctx, args), got {params}")
    model = hints.get(params[1])
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        raise TypeError(f"tool {fn.__name__}: annotate its args with a pydantic model")
    return model


default_registry = ToolRegistry()
tool = default_registry.tool
undo_for = default_registry.undo_for
