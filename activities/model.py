"""`model.call`: one model turn, through the run's `ModelProvider` (ratchet/models).

The workflow sends only what is new since the last call plus a reference to the transcript so
far (in the artifact store), so the bytes each step adds to history do not grow with the step.
A reply that arrived but whose completion was lost (worker crash) is in the ledger under the
call's key: the retry returns it instead of paying twice.
"""

from __future__ import annotations

from collections import OrderedDict

from temporalio import activity
from temporalio.exceptions import ApplicationError

from ratchet.activities.heartbeat import heartbeating
from ratchet.contracts import ArtifactRef, ErrorType, Message, ModelCallConfig, ModelReply, ModelRequest
from ratchet.core import keys
from ratchet.models.provider import ModelCall, ModelProvider, ProviderRegistry
from ratchet.ops.metrics import note_model_settings
from ratchet.stores import transcripts
from ratchet.stores.artifacts import ArtifactStore, get_json
from ratchet.stores.ledger import EntryStatus, Ledger
from ratchet.stores.transcripts import Conversation, TranscriptCache

CONFIGS_CACHED = 256


class ModelActivities:
    def __init__(self, providers: ProviderRegistry, artifacts: ArtifactStore, ledger: Ledger | None = None) -> None:
        self.providers = providers
        self.artifacts = artifacts
        self.ledger = ledger
        self.transcripts = TranscriptCache()
        self.configs: OrderedDict[str, ModelCallConfig] = OrderedDict()

    @activity.defn(name="model.call")
    async def call(self, req: ModelRequest) -> ModelReply:
        key = keys.model_key(activity.info().workflow_id, req.step)
        config = self._config(req.call_ref)
        note_model_settings(config.settings)
        provider = self._provider(config)
        if self.ledger is not None:
            entry = self.ledger.begin(key)
            if entry is not None and entry.status == EntryStatus.COMPLETED:
                return ModelReply.model_validate(entry.result)
        async with heartbeating():
            reply = await self._call(req, key, config, provider)
        if self.ledger is not None:
            self.ledger.complete(key, reply.model_dump(mode="json"))
        return reply

    async def _call(self, req: ModelRequest, key: str, config: ModelCallConfig, provider: ModelProvider) -> ModelReply:
        keep = config.settings.context_messages
        base = self._conversation(req, keep)
        new = [self._inline(m) for m in req.new_messages]
        done = await provider.complete(ModelCall(
            key=key, settings=config.settings, tools=config.tools, messages=base.window(keep) + new,
            turn=base.turns + _turns(new), step=req.step,
        ))
        added = new + [done.message]
        ref = transcripts.write(self.artifacts, base, added, prev=req.transcript)
        self.transcripts.put(ref.digest, base.extended(added, ref.digest, ref.size or 0, keep), owner=_owner())
        natural = "tool_calls" if done.message.tool_calls else "stop"
        return ModelReply(  # finish reason and model only when the message and settings do not say them
            message=done.message, usage=done.usage, transcript=ref.digest,
            finish_reason=None if done.finish_reason in (None, natural) else done.finish_reason,
            model="" if done.model in ("", config.settings.model) else done.model,
        )

    def _provider(self, config: ModelCallConfig) -> ModelProvider:
        provider = self.providers.get(config.settings.provider)
        if provider is None:  # planned on a worker with other providers: another worker may have it
            raise ApplicationError(
                f"model provider {config.settings.provider!r} is not registered on this worker "
                f"(it has: {', '.join(sorted(self.providers.providers)) or 'none'})",
                type=ErrorType.INVALID_PROFILE,
            )
        return provider

    def _config(self, call_ref: str) -> ModelCallConfig:
        """The run's settings and tool schemas: one artifact per run, parsed once per worker."""
        config = self.configs.get(call_ref)
        if config is None:
            config = self.configs[call_ref] = ModelCallConfig.model_validate(get_json(self.artifacts, ArtifactRef.json(call_ref)))
            while len(self.configs) > CONFIGS_CACHED:
                self.configs.popitem(last=False)
        self.configs.move_to_end(call_ref)
        return config

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


def _turns(messages: list[Message]) -> int:
    return sum(m.role == "assistant" for m in messages)


def _owner() -> str | None:
    """The run a model call belongs to (None outside an activity: tests and the bench's micro)."""
    try:
        return activity.info().workflow_id
    except RuntimeError:
        return None

