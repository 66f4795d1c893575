"""The model providers on the same scripted conversation, in-process against the local strict servers
(ratchet.testing.openai_server, ratchet.testing.anthropic_server; their threads are not counted).

- Provider CPU per step: the event loop thread's CPU time (`time.thread_time`) of one
  `complete()` (render the conversation, the SDK's request and parse) at each step of a growing
  conversation, Anthropic over OpenAI; the rest of a step (ledger, transcript, workflow) is the same
  for both. Target: at most 1.1.
- Prompt tokens billed per step with prompt caching on against off over a 20-step conversation
  (Anthropic's prices: a cache read 0.1 of an input token, a cache write 1.25); the local server
  simulates the cache (a breakpoint's prefix seen before is a read).
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from statistics import median
from typing import Any

CACHE_READ, CACHE_WRITE = 0.1, 1.25
"""Anthropic's prices of cached prompt tokens, as fractions of an input token's."""


def _conversation(steps: int) -> tuple[list[Any], list[Any]]:
    """A coder-like conversation of `steps` steps (a tool call with a 2 KB result each) and its tools."""
    from ratchet.contracts import Message, ToolCallRequest, ToolSchema
    from ratchet.core.profiles import CODER
    from ratchet.plugin import builtin_tools

    registry = builtin_tools()
    tools: list[ToolSchema] = [registry.get(name).tool_schema() for name in CODER.tools]
    messages = [Message(role="system", content=CODER.system_prompt), Message(role="user", content="fix the tests")]
    for i in range(steps):
        call = ToolCallRequest(id=f"call_{i}_0", name="read_file", arguments=json.dumps({"path": f"f{i}.py"}))
        messages.append(Message(role="assistant", content="", tool_calls=[call]))
        messages.append(Message(role="tool", tool_call_id=call.id, content=f"# file {i}\n" + "x = 1\n" * 340))
    return messages, tools


async def _step_cpu(provider: Any, messages: list[Any], tools: list[Any], name: str, steps: int) -> list[float]:
    """CPU ms of this thread per `complete()`, one per step of the conversation."""
    from ratchet.contracts import ModelSettings
    from ratchet.models.provider import ModelCall

    settings = ModelSettings(provider=name, model="bench")
    spent = []
    for step in range(1, steps + 1):
        sent = messages[: 2 + 2 * (step - 1)]
        call = ModelCall(key=f"bench/{step}/model", settings=settings, tools=tools, messages=sent, turn=step - 1, step=step)
        began = time.thread_time()
        await provider.complete(call)
        spent.append((time.thread_time() - began) * 1000)
    return spent


async def provider_costs(steps: int = 20, reps: int = 3) -> dict[str, Any]:
    from ratchet.models.anthropic import AnthropicProvider, AnthropicSettings
    from ratchet.models.openai import OpenAIProvider, OpenAISettings
    from ratchet.testing.anthropic_server import AnthropicServer
    from ratchet.testing.openai_server import OpenAIServer

    messages, tools = _conversation(steps)
    script = [{"tool_calls": [{"name": "read_file", "arguments": {"path": f"f{i}.py"}}]} for i in range(steps)]
    with OpenAIServer() as openai_server, AnthropicServer() as anthropic_server:
        cpu: dict[str, list[float]] = {"openai": [], "anthropic": []}
        billed: dict[bool, list[float]] = {True: [], False: []}
        for _ in range(reps):
            key = f"bench-{uuid.uuid4().hex[:8]}"
            openai_server.set_script(script, key=key)
            anthropic_server.set_script(script, key=key)
            openai = OpenAIProvider(OpenAISettings(base_url=openai_server.base_url, api_key=key))
            anthropic = AnthropicProvider(AnthropicSettings(base_url=anthropic_server.base_url, api_key=key))
            await _step_cpu(openai, messages, tools, "openai", 2)  # warm both clients (connections, imports)
            await _step_cpu(anthropic, messages, tools, "anthropic", 2)
            cpu["openai"] += await _step_cpu(openai, messages, tools, "openai", steps)
            cpu["anthropic"] += await _step_cpu(anthropic, messages, tools, "anthropic", steps)
            for caching in (True, False):
                billed[caching].append(await _billed_per_step(anthropic_server, messages, tools, steps, caching))
    openai_ms, anthropic_ms = median(cpu["openai"]), median(cpu["anthropic"])
    on, off = median(billed[True]), median(billed[False])
    return {
        "steps": steps,
        "openai_step_cpu_ms": openai_ms,
        "anthropic_step_cpu_ms": anthropic_ms,
        "anthropic_openai_cpu_ratio": anthropic_ms / openai_ms,
        "billed_prompt_tokens_per_step_cached": on,
        "billed_prompt_tokens_per_step_uncached": off,
        "cache_billed_prompt_ratio": on / off,
    }


async def _billed_per_step(server: Any, messages: list[Any], tools: list[Any], steps: int, caching: bool) -> float:
    """Input tokens billed per step over the run, cache reads and writes at their prices."""
    from ratchet.contracts import ModelSettings
    from ratchet.models.anthropic import AnthropicProvider, AnthropicSettings
    from ratchet.models.provider import ModelCall

    key = f"billed-{uuid.uuid4().hex[:8]}"  # a cold cache
    server.set_script([{"content": "ok"}] * (steps + 1), key=key)
    provider = AnthropicProvider(AnthropicSettings(base_url=server.base_url, api_key=key))
    settings = ModelSettings(provider="anthropic", model="bench", options={} if caching else {"prompt_caching": False})
    total = 0.0
    for step in range(1, steps + 1):
        sent = messages[: 2 + 2 * (step - 1)]
        done = await provider.complete(
            ModelCall(key=f"b/{step}/model", settings=settings, tools=tools, messages=sent, turn=step - 1, step=step)
        )
        usage = done.usage
        uncached = usage.prompt_tokens - usage.cache_read_tokens - usage.cache_write_tokens
        total += uncached + CACHE_READ * usage.cache_read_tokens + CACHE_WRITE * usage.cache_write_tokens
    return total / steps


if __name__ == "__main__":
    print(json.dumps(asyncio.run(provider_costs()), indent=2))
