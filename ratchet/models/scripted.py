"""The scripted provider: deterministic replies from a script, through the same activity path.

The reply for a call is chosen by how many assistant turns the conversation already has, so a
retried call gets the same reply and a rolled-back run replays its script from the checkpoint.
A run gives its script in its options: `{"provider": "scripted", "options": {"script": [...]}}`,
or `{"script_file": "script.json"}`, a JSON list of replies in the run's workspace, read when the
run is planned (a long script need not travel in the run input). Either way the script becomes an
artifact, named in the run's settings (`options.script_ref`), read once per worker. A reply takes
as long as writing it at `chars_per_s` characters a second (its own setting,
RATCHET_SCRIPTED_CHARS_PER_S; 0: no time), as a model's would; a run that streams gets it in
chunks of `CHUNK_CHARS` characters meanwhile.
"""

from __future__ import annotations

import asyncio
import json
from collections import OrderedDict
from typing import Any

from pydantic import Field, TypeAdapter, ValidationError, model_validator

from ratchet.contracts import ArtifactRef, Message, ModelSettings, Strict, ToolCallRequest, Usage, problems
from ratchet.models.provider import (
    Completion,
    Deltas,
    ModelCall,
    PlanContext,
    ProviderOptionsError,
    answer_from_tool,
    check_options,
)
from ratchet.models.settings import ProviderSettings, env, load
from ratchet.stores.artifacts import ArtifactStore, get_json, put_json

SCRIPTS_CACHED = 64
MAX_SCRIPT_REPLIES = 100_000
MAX_SCRIPT_FILE_BYTES = 64 * 1024 * 1024
CHUNK_CHARS = 8


class ScriptedSettings(ProviderSettings):
    chars_per_s: float = Field(
        0.0,
        ge=0,
        le=10_000_000,
        validation_alias=env("RATCHET_SCRIPTED_CHARS_PER_S"),
        description="How fast the scripted provider writes a reply (characters a second; 0: at once).",
    )

    @property
    def configured(self) -> bool:
        return True


class ScriptedToolCall(Strict):
    name: str
    arguments: dict[str, Any] | str = Field(
        default_factory=dict, description="JSON object, or a raw string sent verbatim (to test bad JSON)."
    )
    id: str | None = None


class ScriptedReply(Strict):
    """One model turn: tool calls, or a final answer in `content`."""

    tool_calls: list[ScriptedToolCall] = Field(default_factory=list)
    content: str | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> ScriptedReply:
        if not self.tool_calls and self.content is None:
            raise ValueError("a scripted reply needs tool_calls or content")
        return self


class ScriptedOptions(Strict):
    """A run's `model.options` for the scripted provider: its replies, inline or in a file."""

    script: list[ScriptedReply] | None = Field(default=None, min_length=1, max_length=MAX_SCRIPT_REPLIES)
    script_file: str | None = Field(
        default=None,
        min_length=1,
        max_length=1000,
        description="A JSON file of scripted replies in the run's workspace, read once when the run is planned.",
    )

    @model_validator(mode="after")
    def _one_source(self) -> ScriptedOptions:
        if (self.script is None) == (self.script_file is None):
            raise ValueError("give 'script' (a list of replies) or 'script_file', one of them")
        return self


_SCRIPT = TypeAdapter(list[ScriptedReply])


class ScriptedProvider:
    name = "scripted"
    default_model = "scripted"

    def __init__(self, artifacts: ArtifactStore, chars_per_s: float | None = None) -> None:
        self.artifacts = artifacts
        self.chars_per_s = chars_per_s if chars_per_s is not None else load(ScriptedSettings).chars_per_s
        self.scripts: OrderedDict[str, list] = OrderedDict()

    def plan(self, settings: ModelSettings, options: dict[str, Any], context: PlanContext) -> ModelSettings:
        """The script, stored as an artifact the run's settings name (`options.script_ref`)."""
        given = check_options(ScriptedOptions, options)
        script = given.script if given.script is not None else _script_file(context, given.script_file or "")
        ref = put_json(context.artifacts, [r.model_dump(exclude_none=True) for r in script])
        return settings.model_copy(update={"options": {"script_ref": ref.model_dump(exclude_defaults=True)}})

    def unavailable(self, settings: ModelSettings) -> str | None:
        if "script_ref" not in settings.options:
            return "the scripted provider needs options.script (a list of replies) or options.script_file"
        return None

    async def complete(self, call: ModelCall) -> Completion:
        if call.summary:  # a compaction: answered here, the script's replies are the turns'
            message = Message(role="assistant", content=scripted_summary(call.messages))
            return Completion(message=message, usage=_usage(call.messages, message))
        ref = ArtifactRef.model_validate(call.settings.options["script_ref"])
        message, usage = scripted_reply(self._script(ref), call.turn, call.messages, call.step)
        if call.deltas is not None:
            await self._write(message, call.deltas)
        elif self.chars_per_s > 0:  # as long as writing it takes, streamed or not
            await asyncio.sleep(_chars(message) / self.chars_per_s)
        return Completion(message=answer_from_tool(message) if call.output else message, usage=usage)

    async def _write(self, message: Message, deltas: Deltas) -> None:
        """The reply in chunks, at `chars_per_s` (at once when that is 0: a reply written in no time)."""

        async def chunks(text: str):
            if self.chars_per_s == 0:
                yield text
                return
            for i in range(0, len(text), CHUNK_CHARS):
                chunk = text[i : i + CHUNK_CHARS]
                yield chunk
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


def _script_file(context: PlanContext, relative: str) -> list[ScriptedReply]:
    try:
        text = context.read_workspace_file(relative, MAX_SCRIPT_FILE_BYTES)
    except ProviderOptionsError as exc:
        raise ProviderOptionsError("script_file", str(exc)) from None
    try:
        script = _SCRIPT.validate_json(text)
    except ValidationError as err:
        [first] = problems(err, "the file", limit=1)
        raise ProviderOptionsError(
            "script_file", f"{relative!r} is not a list of scripted replies: at {first}"
        ) from None
    if not script or len(script) > MAX_SCRIPT_REPLIES:
        raise ProviderOptionsError(
            "script_file", f"{relative!r} has {len(script)} replies; give 1 to {MAX_SCRIPT_REPLIES:,}"
        )
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


def scripted_summary(messages: list[Message]) -> str:
    """A compaction's summary, deterministic and as short however long the conversation: how many
    questions it had and the latest one (the last message is the request for the summary)."""
    asked = [m.content or "" for m in messages[:-1] if m.role == "user" and not m.summary]
    latest = asked[-1][:80] if asked else ""
    return f"{len(asked)} questions since the last summary; the latest: {latest!r}"


def _chars(message: Message) -> int:
    return len(message.content or "") + sum(len(c.arguments) for c in message.tool_calls)


def _arguments(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _usage(transcript: list[Message], message: Message) -> Usage:
    prompt_chars = sum(len(m.content or "") for m in transcript)
    completion_chars = len(message.content or "") + sum(len(c.arguments) for c in message.tool_calls)
    return Usage(prompt_tokens=prompt_chars // 4 + 1, completion_tokens=completion_chars // 4 + 1)
