"""The scripted provider: deterministic replies from a script, through the same activity path.

The reply for a call is chosen by how many assistant turns the transcript already has, so a
retried call gets the same reply and a rolled-back run replays its script from the checkpoint.
"""

from __future__ import annotations

import json
from typing import Any

from ratchet.contracts import Message, ToolCallRequest, Usage


def scripted_reply(script: list[dict[str, Any]], turn: int, transcript: list[Message], step: int) -> tuple[Message, Usage]:
    """Reply number `turn` (the assistant messages in the conversation so far); `transcript` is
    what the model is sent (for the token counts)."""
    if turn < len(script):
        reply = script[turn]
    else:
        reply = {"content": "(the script has no more replies)"}
    calls = [
        ToolCallRequest(
            id=call.get("id") or f"call_{step}_{j}",
            name=call["name"],
            arguments=_arguments(call.get("arguments", {})),
        )
        for j, call in enumerate(reply.get("tool_calls") or [])
    ]
    message = Message(role="assistant", content=reply.get("content"), tool_calls=calls)
    return message, _usage(transcript, message)


def _arguments(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _usage(transcript: list[Message], message: Message) -> Usage:
    prompt_chars = sum(len(m.content or "") for m in transcript)
    completion_chars = len(message.content or "") + sum(len(c.arguments) for c in message.tool_calls)
    return Usage(prompt_tokens=prompt_chars // 4 + 1, completion_tokens=completion_chars // 4 + 1)
