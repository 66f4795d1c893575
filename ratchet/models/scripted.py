"""The scripted provider: deterministic replies from a script, through the same activity path.

The reply for a call is chosen by how many assistant turns the conversation already has, so a
retried call gets the same reply and a rolled-back run replays its script from the checkpoint.
The script is an artifact (`ModelSettings.script_ref`, written when the run is planned), read
once per worker. A reply takes as long as writing it at `chars_per_s` characters a second
(RATCHET_SCRIPTED_CHARS_PER_S; 0: no time), as a model's would; a run that streams gets it in
chunks of `CHUNK_CHARS` characters meanwhile.
"""

from __future__ import annotations

import asyncio
import json
from collections import OrderedDict
from typing import Any

from ratchet.contracts import ArtifactRef, Message, ModelSettings, ToolCallRequest, Usage
from ratchet.models.provider import Completion, Deltas, ModelCall
from ratchet.stores.artifacts import ArtifactStore, get_json

SCRIPTS_CACHED = 64
CHUNK_CHARS = 8


class ScriptedProvider:
    name = "scripted"

    def __init__(self, artifacts: ArtifactStore, chars_per_s: float = 0.0) -> None:
        self.artifacts = artifacts
        self.chars_per_s = chars_per_s
        self.scripts: OrderedDict[str, list] = OrderedDict()

    def unavailable(self, settings: ModelSettings) -> str | None:
        return None if settings.script_ref is not None else "the scripted provider needs a 'script' or 'script_file'"

    async def complete(self, call: ModelCall) -> Completion:
        assert call.settings.script_ref is not None, "planned without a script"
        message, usage = scripted_reply(self._script(call.settings.script_ref), call.turn, call.messages, call.step)
        if call.deltas is not None:
            await self._write(message, call.deltas)
        elif self.chars_per_s > 0:  # as long as writing it takes, streamed or not
            await asyncio.sleep(_chars(message) / self.chars_per_s)
        return Completion(message=message, usage=usage)

    async def _write(self, message: Message, deltas: Deltas) -> None:
        """The reply in chunks, at `chars_per_s`."""

        async def chunks(text: str):
            for i in range(0, len(text), CHUNK_CHARS):
                chunk = text[i : i + CHUNK_CHARS]
                yield chunk
                if self.chars_per_s > 0:
                    await asyncio.sleep(len(chunk) / self.chars_per_s)

        async for chunk in chunks(message.content or ""):
            deltas.text(chunk)
        for index, call in enumerate(message.tool_calls):
            deltas.tool_call(index, call.name)
            async for chunk in chunks(call.arguments):
                deltas.tool_call(index, arguments=chunk)

    def _script(self, ref: ArtifactRef) -> list:
        """A run's replies, read once per worker (a 5,000-reply script: 12 ms a call)."""
        script = self.scripts.get(ref.digest)
        if script is None:
            script = self.scripts[ref.digest] = get_json(self.artifacts, ref)
            while len(self.scripts) > SCRIPTS_CACHED:
                self.scripts.popitem(last=False)
        self.scripts.move_to_end(ref.digest)
        return script


def scripted_reply(
    script: list[dict[str, Any]], turn: int, transcript: list[Message], step: int
) -> tuple[Message, Usage]:
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


def _chars(message: Message) -> int:
    return len(message.content or "") + sum(len(c.arguments) for c in message.tool_calls)


def _arguments(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _usage(transcript: list[Message], message: Message) -> Usage:
    prompt_chars = sum(len(m.content or "") for m in transcript)
    completion_chars = len(message.content or "") + sum(len(c.arguments) for c in message.tool_calls)
    return Usage(prompt_tokens=prompt_chars // 4 + 1, completion_tokens=completion_chars // 4 + 1)
