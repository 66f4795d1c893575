"""`model.call`: one model turn, through the openai client or the scripted provider.

The workflow sends only what is new since the last call plus a reference to the transcript so
far (in the artifact store), so the bytes each step adds to history do not grow with the step.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import openai
from temporalio import activity

from ratchet.activities.heartbeat import heartbeating
from ratchet.stores.ledger import EntryStatus, Ledger
from ratchet.models.errors import classify
from ratchet.models.scripted import scripted_reply
from ratchet.stores.artifacts import ArtifactStore, get_json
from ratchet.core import keys
from ratchet.stores import transcripts
from ratchet.contracts import ArtifactRef, Message, ModelCallConfig, ModelReply, ModelRequest, ToolCallRequest, Usage
from ratchet.ops.metrics import note_model_settings
from ratchet.ops.settings import Settings
from ratchet.stores.transcripts import Conversation, TranscriptCache


class ModelActivities:
    def __init__(self, settings: Settings, artifacts: ArtifactStore, ledger: Ledger | None = None) -> None:
        self.settings = settings
        self.artifacts = artifacts
        self.ledger = ledger
        self.transcripts = TranscriptCache()
        self.configs: OrderedDict[str, ModelCallConfig] = OrderedDict()
        self.scripts: OrderedDict[str, list] = OrderedDict()
        self._client: openai.AsyncOpenAI | None = None

    def client(self) -> openai.AsyncOpenAI:
        """One client per worker; its own retries are off so Temporal's retry policy governs."""
        if self._client is None:
            key = self.settings.openai_api_key
            self._client = openai.AsyncOpenAI(
                api_key=key.get_secret_value() if key else "not-needed",
                base_url=self.settings.openai_base_url,
                max_retries=0,
            )
        return self._client

    @activity.defn(name="model.call")
    async def call(self, req: ModelRequest) -> ModelReply:
        """One model turn. A reply that arrived but whose completion was lost (worker crash) is
        in the ledger under the call's key: the retry returns it instead of paying twice."""
        key = keys.model_key(activity.info().workflow_id, req.step)
        config = self._config(req.call_ref)
        note_model_settings(config.settings)
        if self.ledger is not None:
            entry = self.ledger.begin(key)
            if entry is not None and entry.status == EntryStatus.COMPLETED:
                return ModelReply.model_validate(entry.result)
        async with heartbeating():
            reply = await self._call(req, key, config)
        if self.ledger is not None:
            self.ledger.complete(key, reply.model_dump(mode="json"))
        return reply

    async def _call(self, req: ModelRequest, key: str, config: ModelCallConfig) -> ModelReply:
        keep = config.settings.context_messages
        base = self._conversation(req, keep)
        new = [self._inline(m) for m in req.new_messages]
        sent = base.window(keep) + new
        if config.settings.provider == "scripted":
            assert config.settings.script_ref is not None, "scripted provider without a script"
            message, usage = scripted_reply(self._script(config.settings.script_ref), base.turns + _turns(new), sent, req.step)
            finish, model = None, ""
        else:
            message, usage, finish, model = await self._openai(key, config, sent)
        added = new + [message]
        ref = transcripts.write(self.artifacts, base, added, prev=req.transcript)
        self.transcripts.put(ref.digest, base.extended(added, ref.digest, ref.size or 0, keep), owner=_owner())
        natural = "tool_calls" if message.tool_calls else "stop"
        return ModelReply(  # finish reason and model only when the message and settings do not say them
            message=message, usage=usage, transcript=ref.digest,
            finish_reason=None if finish in (None, natural) else finish,
            model="" if model == config.settings.model else model,
        )

    def _config(self, call_ref: str) -> ModelCallConfig:
        """The run's settings and tool schemas: one artifact per run, parsed once per worker."""
        load = lambda: ModelCallConfig.model_validate(get_json(self.artifacts, ArtifactRef.json(call_ref)))  # noqa: E731
        return _cached(self.configs, call_ref, load, limit=256)

    def _script(self, ref: ArtifactRef) -> list:
        """A scripted run's replies, read once per worker (a 5,000-reply script: 12 ms a call)."""
        return _cached(self.scripts, ref.digest, lambda: get_json(self.artifacts, ref), limit=64)

    def _conversation(self, req: ModelRequest, keep: int | None) -> Conversation:
        """The conversation the request builds on, as much of it as the call sends."""
        if req.transcript is None:
            return Conversation()
        cached = self.transcripts.get(req.transcript)
        if cached is not None and cached.has_window(keep):
            return cached
        conversation = transcripts.read(self.artifacts, req.transcript, keep)
        self.transcripts.put(req.transcript, conversation, owner=_owner())
        return conversation

    def _inline(self, message: Message) -> Message:
        """A long tool output travels through history as a reference; the model sees all of it."""
        if message.content_ref is None:
            return message
        full = self.artifacts.get(message.content_ref).decode(errors="replace")
        return message.model_copy(update={"content": full, "content_ref": None})

    async def _openai(self, key: str, config: ModelCallConfig, transcript: list[Message]):
        settings = config.settings
        kwargs: dict[str, Any] = {}
        if settings.temperature is not None:
            kwargs["temperature"] = settings.temperature
        if settings.max_output_tokens is not None:
            kwargs["max_tokens"] = settings.max_output_tokens
        if config.tools:
            kwargs["tools"] = config.tools
        try:
            completion = await self.client().chat.completions.create(
                model=settings.model,
                messages=[to_openai(m) for m in transcript],
                timeout=settings.timeout_s,
                extra_headers={"Idempotency-Key": key},
                **kwargs,
            )
            choice = completion.choices[0]
        except (openai.OpenAIError, ValueError, IndexError, TypeError) as exc:
            # `from None`: the openai exception chain and its stack traces (~6 KB) would exceed
            # the server's size limit for a retrying activity's last failure, hiding the reason.
            raise classify(exc) from None
        message = from_openai(choice.message)
        usage = Usage(
            prompt_tokens=getattr(completion.usage, "prompt_tokens", 0) or 0,
            completion_tokens=getattr(completion.usage, "completion_tokens", 0) or 0,
        )
        return message, usage, choice.finish_reason, completion.model or settings.model


def _cached(cache: OrderedDict, key: str, load: Callable[[], Any], limit: int) -> Any:
    """`cache[key]`, loaded on a miss; the least recently used entries go beyond `limit`."""
    value = cache.get(key)
    if value is None:
        value = cache[key] = load()
        while len(cache) > limit:
            cache.popitem(last=False)
    cache.move_to_end(key)
    return value


def _turns(messages: list[Message]) -> int:
    return sum(m.role == "assistant" for m in messages)


def _owner() -> str | None:
    """The run a model call belongs to (None outside an activity: tests and the bench's micro)."""
    try:
        return activity.info().workflow_id
    except RuntimeError:
        return None


def to_openai(message: Message) -> dict[str, Any]:
    out: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        out["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in message.tool_calls
        ]
    if message.tool_call_id is not None:
        out["tool_call_id"] = message.tool_call_id
    return out


def from_openai(message: Any) -> Message:
    calls = [
        ToolCallRequest(
            id=c.id or f"call_{j}",
            name=c.function.name,
            arguments=c.function.arguments if isinstance(c.function.arguments, str) else json.dumps(c.function.arguments),
        )
        for j, c in enumerate(message.tool_calls or [])
        if getattr(c, "function", None) is not None
    ]
    return Message(role="assistant", content=message.content, tool_calls=calls)
