"""The scripted provider: deterministic replies from a script, through the same activity path.

The reply for a call is chosen by how many assistant turns the conversation already has, so a
retried call gets the same reply and a rolled-back run replays its script from the checkpoint.
The script is an artifact (`ModelSettings.script_ref`, written when the run is planned), read
once per worker.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from typing import Any

from ratchet.contracts import ArtifactRef, Message, ModelSettings, ToolCallRequest, Usage
from ratchet.models.provider import Completion, ModelCall
from ratchet.stores.artifacts import ArtifactStore, get_json

SCRIPTS_CACHED = 64


class ScriptedProvider:
    name = "scripted"

    def __init__(self, artifacts: ArtifactStore) -> None:
        self.artifacts = artifacts
        self.scripts: OrderedDict[str, list] = OrderedDict()

    def unavailable(self, settings: ModelSettings) -> str | None:
        return None if settings.script_ref is not None else "the scripted provider needs a 'script' or 'script_file'"

    async def complete(self, call: ModelCall) -> Completion:
        assert call.settings.script_ref is not None, "planned without a script"
        message, usage = scripted_reply(self._script(call.settings.script_ref), call.turn, call.messages, call.step)
        return Completion(message=message, usage=usage)

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


def _arguments(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _usage(transcript: list[Message], message: Message) -> Usage:
    prompt_chars = sum(len(m.content or "") for m in transcript)
    completion_chars = len(message.content or "") + sum(len(c.arguments) for c in message.tool_calls)
    return Usage(prompt_tokens=prompt_chars // 4 + 1, completion_tokens=completion_chars // 4 + 1)
