"""`model.call`: one model turn, through the run's `ModelProvider` (ratchet/models).

The workflow sends only what is new since the last call plus a reference to the transcript so
far (in the artifact store), so the bytes each step adds to history do not grow with the step.
A reply that arrived but whose completion was lost (worker crash) is in the ledger under the
call's key: the retry returns it instead of paying twice.

The ledger and the artifact store are synchronous and may be remote (Postgres, S3), so their calls
run in a thread, never on the worker's event loop, where a round trip would hold up every other
run on the worker. A step makes two such hops: the ledger's `begin` (with a config or transcript
read on a cache miss), and the segment write with the ledger's `complete`. The caches stay on the
event loop.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections import OrderedDict

from temporalio import activity
from temporalio.exceptions import ApplicationError

from ratchet.contracts.activities import COMPACT, MODEL_CALL
from . import caller
from .heartbeat import heartbeating
from .streaming import reply_stream
from ratchet.contracts import (
    ArtifactRef,
    CompactReply,
    CompactRequest,
    ErrorType,
    Message,
    ModelCallConfig,
    ModelReply,
    ModelRequest,
    ModelSettings,
    Streamed,
)
from ratchet.core import budget, keys, outputs
from ratchet.models.provider import Completion, Deltas, ModelCall, ModelProvider, ProviderRegistry
from ratchet.ops.metrics import note_model_settings
from ratchet.stores import transcripts
from ratchet.stores.artifacts import ArtifactStore, get_json
from ratchet.stores.ledger import Entry, EntryStatus, Ledger
from ratchet.stores.transcripts import Conversation, TranscriptCache

CONFIGS_CACHED = 256
SUMMARY_PROMPT = (
    "Summarise this conversation so far for yourself, to continue it without the messages above: "
    "what was asked, what you did and found (files, tickets, results), what you answered, and "
    "anything still open. Keep names, numbers and decisions exact; keep the latest exchange in most detail."
)


class ModelActivities:
    def __init__(self, providers: ProviderRegistry, artifacts: ArtifactStore, ledger: Ledger | None = None) -> None:
        self.providers = providers
        self.artifacts = artifacts
        self.ledger = ledger
        self.transcripts = TranscriptCache()
        self.configs: OrderedDict[str, ModelCallConfig] = OrderedDict()

    @activity.defn(name=MODEL_CALL.name)
    async def call(self, req: ModelRequest) -> ModelReply:
        key = keys.model_key(caller.workflow_id(), req.step)
        cached = self._cached(req)
        entry, config, base = await asyncio.to_thread(self._begin, key, req, *cached)
        attempt = activity.info().attempt
        if entry is not None and entry.status == EntryStatus.COMPLETED:
            reply = ModelReply.model_validate(entry.result)
            # an earlier attempt streamed it, perhaps in part: the workflow publishes it whole, superseding that
            if attempt > 1 and (cached[0] is None or cached[0].settings.stream):
                reply.streamed = Streamed(attempt=attempt)
            return reply
        assert config is not None and base is not None
        self._remember(req, config, base)
        settings = config.settings if req.choice == 0 else config.fallbacks[req.choice - 1]
        note_model_settings(settings)
        provider = self._provider(settings)
        async with heartbeating(), reply_stream(req.step, config.settings.stream) as deltas:
            done, added = await self._call(req, key, config, settings, provider, base, deltas)
        reply, extended = await asyncio.to_thread(self._finish, key, req, config, settings, base, done, added)
        self.transcripts.put(reply.transcript, extended, owner=_owner())
        if deltas is not None:
            reply = reply.model_copy(update={"streamed": deltas.streamed()})
        return reply

    @activity.defn(name=COMPACT.name)
    async def compact(self, req: CompactRequest) -> CompactReply:
        """A session's compaction: the model summarises the conversation as it sees it; the summary
        becomes a summary segment of the transcript (ratchet/stores/transcripts.py), from which on
        the model sees it instead of the turns before. Recorded in the ledger under
        `{workflow id}/{step}/compact`: a retry after a lost completion returns the same summary."""
        key = keys.call_key(caller.workflow_id(), req.step, "compact")
        entry = await asyncio.to_thread(self.ledger.begin, key) if self.ledger is not None else None
        if entry is not None and entry.status == EntryStatus.COMPLETED:
            return CompactReply.model_validate(entry.result)
        config = self.configs.get(req.call_ref)
        if config is None:
            config = await asyncio.to_thread(
                lambda: ModelCallConfig.model_validate(get_json(self.artifacts, ArtifactRef.json(req.call_ref)))
            )
        base = self.transcripts.get(req.transcript)
        if base is None or not base.complete:
            base = await asyncio.to_thread(transcripts.read, self.artifacts, req.transcript)
        settings = config.settings
        ask = Message(role="user", content=SUMMARY_PROMPT)
        async with heartbeating():
            done = await self._provider(settings).complete(
                ModelCall(
                    key=key,
                    settings=settings,
                    tools=[],
                    messages=base.window(None)[1:] + [ask],  # the system prompt is the agent's, not the summariser's
                    turn=base.turns,
                    step=req.step,
                    summary=True,
                )
            )
        summary = Message(
            role="user",
            content=f"[Summary of turns {req.turns} (the transcript keeps them whole)]\n{done.message.content or ''}",
            summary=True,
        )

        def record() -> tuple[CompactReply, int]:
            ref = transcripts.write(self.artifacts, base, [summary], prev=req.transcript, summary=True)
            reply = CompactReply(message=summary, usage=done.usage, transcript=ref.digest)
            if self.ledger is not None:
                self.ledger.complete(key, reply.model_dump(mode="json"))
            return reply, ref.size or 0

        reply, size = await asyncio.to_thread(record)
        self.transcripts.put(reply.transcript, base.summarised(summary, reply.transcript, size), owner=_owner())
        return reply

    def _cached(self, req: ModelRequest) -> tuple[ModelCallConfig | None, Conversation | None]:
        """The run's config and the conversation so far (as much as the call sends), if cached."""
        config = self.configs.get(req.call_ref)
        keep = config.settings.context_messages if config is not None else None
        base = self.transcripts.get(req.transcript) if req.transcript is not None else None
        return config, base if base is not None and base.has_window(keep) else None

    def _begin(
        self,
        key: str,
        req: ModelRequest,
        config: ModelCallConfig | None,
        base: Conversation | None,
    ) -> tuple[Entry | None, ModelCallConfig | None, Conversation | None]:
        """In a thread: the ledger's `begin`, then (unless the reply is recorded already) what the
        caches did not have: the run's config, the conversation so far."""
        entry = self.ledger.begin(key) if self.ledger is not None else None
        if entry is not None and entry.status == EntryStatus.COMPLETED:
            return entry, None, None
        if config is None:
            config = ModelCallConfig.model_validate(get_json(self.artifacts, ArtifactRef.json(req.call_ref)))
        if base is None:
            keep = config.settings.context_messages
            base = (
                transcripts.read(self.artifacts, req.transcript, keep) if req.transcript is not None else Conversation()
            )
        return entry, config, base

    def _remember(self, req: ModelRequest, config: ModelCallConfig, base: Conversation) -> None:
        """The config (one artifact per run, parsed once per worker) and the conversation, cached."""
        self.configs[req.call_ref] = config
        self.configs.move_to_end(req.call_ref)
        while len(self.configs) > CONFIGS_CACHED:
            self.configs.popitem(last=False)
        if req.transcript is not None and self.transcripts.get(req.transcript) is not base:
            self.transcripts.put(req.transcript, base, owner=_owner())

    async def _call(
        self,
        req: ModelRequest,
        key: str,
        config: ModelCallConfig,
        settings: ModelSettings,
        provider: ModelProvider,
        base: Conversation,
        deltas: Deltas | None,
    ) -> tuple[Completion, list[Message]]:
        keep = config.settings.context_messages
        new = req.new_messages
        if any(m.content_ref is not None for m in new):
            limit = config.settings.tool_output_chars
            new = await asyncio.to_thread(lambda: [self._inline(m, limit) for m in req.new_messages])
        messages = base.window(keep) + new
        done = await provider.complete(
            ModelCall(
                key=key,
                settings=_within_budget(req, config, settings, messages),
                tools=config.tools,
                output=config.output,
                messages=messages,
                turn=base.turns + _turns(new),
                step=req.step,
                deltas=deltas,
            )
        )
        message = done.message
        if req.choice:  # the transcript says which model answered the turn
            message = message.model_copy(update={"answered_by": f"{settings.provider}/{done.model or settings.model}"})
        done = dataclasses.replace(done, message=message)
        return done, new + [message]

    def _finish(
        self,
        key: str,
        req: ModelRequest,
        config: ModelCallConfig,
        settings: ModelSettings,
        base: Conversation,
        done: Completion,
        added: list[Message],
    ) -> tuple[ModelReply, Conversation]:
        """In a thread: write the step's transcript segment, then record the reply in the ledger
        (in that order: a recorded reply always names a stored transcript)."""
        ref = transcripts.write(self.artifacts, base, added, prev=req.transcript)
        natural = "tool_calls" if done.message.tool_calls else "stop"
        reply = ModelReply(  # finish reason and model only when the message and settings do not say them
            message=done.message,
            usage=done.usage,
            transcript=ref.digest,
            finish_reason=None if done.finish_reason in (None, natural) else done.finish_reason,
            model="" if done.model in ("", settings.model) else done.model,
        )
        if config.output is not None and not done.message.tool_calls and done.finish_reason != "length":
            reply.output, reply.output_error = outputs.check(config.output, done.message.content)
        if self.ledger is not None:
            self.ledger.complete(key, reply.model_dump(mode="json"))
        return reply, base.extended(added, ref.digest, ref.size or 0, config.settings.context_messages)

    def _provider(self, settings: ModelSettings) -> ModelProvider:
        provider = self.providers.get(settings.provider)
        if provider is None:  # planned on a worker with other providers: another worker may have it
            raise ApplicationError(
                f"model provider {settings.provider!r} is not registered on this worker "
                f"(it has: {', '.join(sorted(self.providers.providers)) or 'none'})",
                type=ErrorType.INVALID_PROFILE,
            )
        return provider

    def _inline(self, message: Message, limit: int | None) -> Message:
        """A long tool output travels through history as a reference; the model sees it whole, or
        cut to `limit` characters (`AgentProfile.tool_output_chars`)."""
        if message.content_ref is None:
            return message
        full = self.artifacts.get(message.content_ref).decode(errors="replace")
        return message.model_copy(update={"content": cut(full, limit, message.content_ref), "content_ref": None})


def cut(text: str, limit: int | None, ref: ArtifactRef) -> str:
    """`text` whole if it fits `limit`, else its first three quarters and last quarter of `limit`
    around a note saying how much is left out and which artifact holds it all."""
    if limit is None or len(text) <= limit:
        return text
    head = limit * 3 // 4
    tail = limit - head
    note = (
        f"\n[... {len(text) - limit:,} characters left out here; the whole output "
        f"({len(text):,} characters) is artifact sha256:{ref.digest} ...]\n"
    )
    return text[:head] + note + text[-tail:]


def _within_budget(
    req: ModelRequest, config: ModelCallConfig, settings: ModelSettings, messages: list[Message]
) -> ModelSettings:
    """The run's settings with the output capped at what is left of its budget; a call whose
    prompt alone would not fit is refused (non-retryable `BudgetExhausted`: the run ends
    BUDGET_EXHAUSTED without paying for it)."""
    if req.max_tokens is None and req.max_cost_usd is None:
        return settings
    chars = sum(len(t.name) + len(t.description) + len(json.dumps(t.parameters)) for t in config.tools) + sum(
        len(m.content or "") + sum(len(c.name) + len(c.arguments) for c in m.tool_calls) for m in messages
    )
    prompt = budget.prompt_estimate(chars, len(messages))
    cap = budget.output_cap(req.max_tokens, req.max_cost_usd, prompt, settings)
    if isinstance(cap, str):
        raise ApplicationError(cap, type=ErrorType.BUDGET_EXHAUSTED, non_retryable=True)
    if cap == settings.max_output_tokens:
        return settings
    return settings.model_copy(update={"max_output_tokens": cap})


def _turns(messages: list[Message]) -> int:
    return sum(m.role == "assistant" for m in messages)


def _owner() -> str | None:
    """The run a model call belongs to (None outside an activity: tests and the bench's micro)."""
    try:
        return activity.info().workflow_id
    except RuntimeError:
        return None
