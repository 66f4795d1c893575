"""The Messages API's shapes for the anthropic provider (ratchet/models/anthropic.py): a call
rendered as the request body, the reply read back as a message, its usage. Plain data: the SDK is
never imported here.

The conversation is rendered in the API's shape: the system prompt as the `system` field, tool calls
as `tool_use` blocks, their results as `tool_result` blocks (a failed call with `is_error`) in the
next user turn, consecutive user-side messages merged so the roles alternate, no empty text block.
With caching on, an agent re-sends its whole context at every step, so `cache_control` marks the
tool list and the system prompt (the same every step) and the end of the conversation so far (the
next step's prefix).

The request is rendered as the API's body; the fields the installed SDK's method does not name go in
its `extra_body` (`sdk_arguments`). anthropic 2.x dropped `temperature` from `messages.create` while
the API (and llama-server's `/v1/messages`) still takes it; as a keyword it failed every call.
"""

from __future__ import annotations

import functools
import inspect
import json
import re
from collections.abc import Callable
from typing import Any

from ratchet.contracts import Message, ToolCallRequest, ToolSchema, Usage
from ratchet.models.provider import ModelCall, final_answer_tool

CACHE: dict[str, Any] = {"type": "ephemeral"}
_TOOL_ID = re.compile(r"[^A-Za-z0-9_-]")


def sdk_arguments(method: Callable[..., Any], body: dict[str, Any]) -> dict[str, Any]:
    """`method`'s keyword arguments for a request `body`: the fields its signature names, the others
    (fields the API takes that this SDK version does not name) in `extra_body`, which the SDK merges
    into the body it sends."""
    named = _named(getattr(method, "__func__", method))
    arguments = {k: v for k, v in body.items() if k in named}
    extra = {k: v for k, v in body.items() if k not in named}
    return {**arguments, "extra_body": extra} if extra else arguments


@functools.cache
def _named(function: Callable[..., Any]) -> frozenset[str]:
    parameters = inspect.signature(function).parameters.values()
    named = (p.name for p in parameters if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD))
    return frozenset(named) - {"self", "extra_body"}


def render(call: ModelCall, default_max_tokens: int, caching: bool) -> dict[str, Any]:
    """The Messages API request body of a call (`sdk_arguments` makes it the SDK's keyword arguments)."""
    settings = call.settings
    system: list[dict[str, Any]] = [
        {"type": "text", "text": m.content} for m in call.messages if m.role == "system" and m.content
    ]
    messages = to_anthropic([m for m in call.messages if m.role != "system"])
    offered = [*call.tools, final_answer_tool(call.output)] if call.output else call.tools
    tools = [to_anthropic_tool(t) for t in offered]
    if caching:
        for blocks in (tools, system, messages[-1]["content"] if messages else []):
            if blocks:
                blocks[-1]["cache_control"] = CACHE
    request: dict[str, Any] = {
        "model": settings.model,
        "max_tokens": settings.max_output_tokens or default_max_tokens,
        "messages": messages,
    }
    if system:
        request["system"] = system
    if tools:
        request["tools"] = tools
    if settings.temperature is not None:
        request["temperature"] = min(settings.temperature, 1.0)  # the API's range is 0..1
    return request


def to_anthropic_tool(tool: ToolSchema) -> dict[str, Any]:
    rendered: dict[str, Any] = {"name": tool.name, "input_schema": tool.parameters}
    if tool.description:
        rendered["description"] = tool.description
    return rendered


def to_anthropic(messages: list[Message]) -> list[dict[str, Any]]:
    """The conversation as alternating turns of content blocks: tool results (first, as the API
    requires) and user text merge into one user turn; every tool_use is answered in the next one."""
    turns: list[dict[str, Any]] = []
    for message in messages:
        role = "assistant" if message.role == "assistant" else "user"
        blocks = _blocks(message)
        if turns and turns[-1]["role"] == role:
            previous = turns[-1]["content"]
            results = [b for b in previous + blocks if b["type"] == "tool_result"]
            turns[-1]["content"] = results + [b for b in previous + blocks if b["type"] != "tool_result"]
        else:
            turns.append({"role": role, "content": blocks})
    if turns and turns[0]["role"] != "user":
        turns.insert(0, {"role": "user", "content": [{"type": "text", "text": "(continue)"}]})
    return turns


def _blocks(message: Message) -> list[dict[str, Any]]:
    text = message.content or ""
    if message.role == "tool":
        result: dict[str, Any] = {"type": "tool_result", "tool_use_id": tool_id(message.tool_call_id or "")}
        if text:
            result["content"] = [{"type": "text", "text": text}]
        if message.is_error:
            result["is_error"] = True
        return [result]
    blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text.strip() else []
    for call in message.tool_calls:
        blocks.append(
            {"type": "tool_use", "id": tool_id(call.id), "name": call.name, "input": input_object(call.arguments)}
        )
    return blocks or [{"type": "text", "text": "(no content)"}]


def tool_id(call_id: str) -> str:
    """An id the API accepts (`^[a-zA-Z0-9_-]+$`), the same for a call and its result."""
    return _TOOL_ID.sub("_", call_id) or "call"


def input_object(arguments: str) -> dict[str, Any]:
    """A past call's arguments as the object the API requires; arguments that were not a JSON object
    go back wrapped (the tool message after the call told the model why it did not run)."""
    try:
        value = json.loads(arguments)
    except ValueError:
        value = None
    return value if isinstance(value, dict) else {"invalid_json_arguments": arguments}


def from_anthropic(content: list[Any], streamed: list[ToolCallRequest] | None = None) -> Message:
    """The reply as a message: its text blocks, and its tool_use blocks (a streamed reply's as
    `ToolUses` assembled them)."""
    text = "".join(block.text for block in content if block.type == "text")
    calls = streamed
    if calls is None:
        calls = [
            ToolCallRequest(id=block.id, name=block.name, arguments=arguments_json(block.input))
            for block in content
            if block.type == "tool_use"
        ]
    return Message(role="assistant", content=text or None, tool_calls=calls)


def arguments_json(value: Any) -> str:
    """A tool_use block's input as the reply records it (and a stream announces it)."""
    return json.dumps(value, ensure_ascii=False)


USAGE_FIELDS = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")


def usage_of(usage: Any) -> Usage:
    """Prompt tokens are all the input the call was billed for: uncached, read from and written to the
    cache (the last two also counted apart, priced by the profile's cache prices)."""
    read = usage.cache_read_input_tokens or 0
    written = usage.cache_creation_input_tokens or 0
    return Usage(
        prompt_tokens=(usage.input_tokens or 0) + read + written,
        completion_tokens=usage.output_tokens or 0,
        cache_read_tokens=read,
        cache_write_tokens=written,
    )
