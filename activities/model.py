"""`model.call`: one model turn, through the run's `ModelProvider` (ratchet/models).

The workflow sends only what is new since the last call plus a reference to the transcript so
far (in the artifact store), so the bytes each step adds to history do not grow with the step.
A reply that arrived but whose completion was lost (worker crash) is in the ledger under the
call's key: the retry returns it instead of paying twice.

The ledger and the artifact store are synchronous and may be remote (Postgres, S3), so their calls
run in a thread, never on the worker's event loop, where a round trip would hold up every other
run on the worker. A step makes two such hops, as the exactly-once protocol
(activities/exactly_once.py) runs it: a read of the call's ledger entry (with a config or transcript
read on a cache miss; a model call does not claim its key, `Call.claims`), and the segment write with
the ledger's `complete`. The caches stay on the event loop.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections import OrderedDict
from dataclasses import dataclass

from temporalio import activity
from temporalio.exceptions import ApplicationError

from ratchet.contracts.activities import COMPACT, MODEL_CALL
from . import billing, caller, exactly_once
from .heartbeat import heartbeating
from .streaming import ReplyStream, reply_stream
from ratchet.contracts import (
    ArtifactRef,
    Billed,
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
from ratchet.stores.billing import BillingStore
from ratchet.stores.ledger import Ledger
from ratchet.stores.transcripts import Conversation, TranscriptCache

CONFIGS_CACHED = 256
SUMMARY_PROMPT = (
    "Summarise this conversation so far for yourself, to continue it without the messages above: "
    "what was asked, what you did and found (files, tickets, results), what you answered, and "
    "anything still open. Keep names, numbers and decisions exact; keep the latest exchange in most detail."
)


@dataclass
class _Turn:
    """One model call (or compaction) across the exactly-once protocol's steps."""

    key: str
    config: ModelCallConfig | None
    """The run's config: from the cache, else read in `begin`'s thread."""
    base: Conversation | None
    """The conversation so far: from the cache, else read in `begin`'s thread."""
    settings: ModelSettings | None = None
    """The settings of the model that answers (the run's, or a fallback's)."""
    deltas: ReplyStream | None = None
    """The reply's stream, when it streams."""
    extended: Conversation | None = None
    """The conversation with the reply, once its transcript segment is written."""
    bill: billing.Attempt | None = None
    """The attempt as it is billed (activities/billing.py)."""

    def received(self) -> int:
        return self.deltas.received if self.deltas is not None else 0


class ModelActivities:
    def __init__(
        self,
        providers: ProviderRegistry,
        artifacts: ArtifactStore,
        ledger: Ledger | None = None,
        billing: BillingStore | None = None,
    ) -> None:
        self.providers = providers
        self.artifacts = artifacts
        self.ledger = ledger
        self.billing = billing
        self.transcripts = TranscriptCache()
        self.configs: OrderedDict[str, ModelCallConfig] = OrderedDict()

    @activity.defn(name=MODEL_CALL.name)
    async def call(self, req: ModelRequest) -> ModelReply:
        turn = _Turn(keys.model_key(caller.workflow_id(), req.step), *self._cached(req))
        turn.bill = billing.Attempt(turn.key, req.step, req.choice)
        call = exactly_once.Call(
            key=turn.key,
            act=lambda: self._act(req, turn),
            result=lambda done, _undo: self._finish(req, turn, *done),
            recorded=lambda result: _replayed(result, turn.config),
            what=MODEL_CALL.name,
            prepare=lambda: self._prepare(turn, req.call_ref, req.transcript),
            idempotent=True,  # a lost reply is asked for again (and paid for twice)
            claims=False,  # its entry only read before acting: one ledger write a call
        )
        reply = await self._billed(call, turn)
        if turn.extended is not None:
            self.transcripts.put(reply.transcript, turn.extended, owner=_owner())
        if turn.deltas is not None:
            reply = reply.model_copy(update={"streamed": turn.deltas.streamed()})
        return reply

    @activity.defn(name=COMPACT.name)
    async def compact(self, req: CompactRequest) -> CompactReply:
        """A session's compaction: the model summarises the conversation as it sees it; the summary
        becomes a summary segment of the transcript (ratchet/stores/transcripts.py), from which on
        the model sees it instead of the turns before. Recorded in the ledger under
        `{workflow id}/{step}/compact`: a retry after a lost completion returns the same summary."""
        base = self.transcripts.get(req.transcript)
        key = keys.call_key(caller.workflow_id(), req.step, "compact")
        turn = _Turn(key, self.configs.get(req.call_ref), base if base is not None and base.complete else None)
        turn.bill = billing.Attempt(key, req.step, 0, compaction=True)
        call = exactly_once.Call(
            key=key,
            act=lambda: self._summarise(req, turn),
            result=lambda done, _undo: self._summarised(req, turn, *done),
            recorded=CompactReply.model_validate,
            what=COMPACT.name,
            prepare=lambda: self._prepare(turn, req.call_ref, req.transcript, whole=True),
            idempotent=True,
            claims=False,  # its entry only read before acting: one ledger write a call
        )
        reply = await self._billed(call, turn)
        if turn.extended is not None:
            self.transcripts.put(reply.transcript, turn.extended, owner=_owner())
        return reply

    async def _billed(self, call: exactly_once.Call, turn: _Turn):
        """The protocol's run; a failed attempt billed first, its error carrying the call's billed total."""
        assert turn.bill is not None
        try:
            return await exactly_once.run(self.ledger, call)
        except Exception as exc:
            raise await billing.failed(self.billing, turn.bill, turn.received(), exc) from None

    async def _summarise(self, req: CompactRequest, turn: _Turn) -> tuple[Completion, Message]:
        assert turn.config is not None and turn.base is not None and turn.bill is not None
        settings, base = turn.config.settings, turn.base
        ask = Message(role="user", content=SUMMARY_PROMPT)
        messages = base.window(None)[1:] + [ask]  # the system prompt is the agent's, not the summariser's
        async with heartbeating():
            meter = turn.bill.sending(settings, messages, [], turn.config)
            done = await self._provider(settings).complete(
                ModelCall(
                    key=turn.key,
                    settings=settings,
                    tools=[],
                    messages=messages,
                    turn=base.turns,
                    step=req.step,
                    summary=True,
                    meter=meter,
                )
            )
        summary = Message(
            role="user",
            content=f"[Summary of turns {req.turns} (the transcript keeps them whole)]\n{done.message.content or ''}",
            summary=True,
        )
        return done, summary

    def _summarised(self, req: CompactRequest, turn: _Turn, done: Completion, summary: Message) -> CompactReply:
        """In a thread, before the ledger records it: the summary segment written, the reply."""
        assert turn.base is not None
        ref = transcripts.write(self.artifacts, turn.base, [summary], prev=req.transcript, summary=True)
        turn.extended = turn.base.summarised(summary, ref.digest, ref.size or 0)
        billed = billing.bill(self.billing, turn.bill, 0) if billing.answered(turn.bill, done.usage) else None
        return CompactReply(message=summary, usage=done.usage, transcript=ref.digest, billed=billed)

    def _cached(self, req: ModelRequest) -> tuple[ModelCallConfig | None, Conversation | None]:
        """The run's config and the conversation so far (as much as the call sends), if cached."""
        config = self.configs.get(req.call_ref)
        keep = config.settings.context_messages if config is not None else None
        base = self.transcripts.get(req.transcript) if req.transcript is not None else None
        return config, base if base is not None and base.has_window(keep) else None

    def _prepare(self, turn: _Turn, call_ref: str, transcript: str | None, whole: bool = False) -> None:
        """In `begin`'s thread: what the call reads, and what earlier attempts were billed."""
        self._read(turn, call_ref, transcript, whole)
        if turn.bill is not None:
            billing.earlier(self.billing, turn.bill)
            billing.tenant_spent(self.billing, turn.bill, turn.config)

    def _read(self, turn: _Turn, call_ref: str, transcript: str | None, whole: bool = False) -> None:
        """In `begin`'s thread, when the call will act: what the caches did not have: the run's
        config, the conversation so far (whole, or as much as the call sends)."""
        if turn.config is None:
            turn.config = ModelCallConfig.model_validate(get_json(self.artifacts, ArtifactRef.json(call_ref)))
        if turn.base is None:
            keep = None if whole else turn.config.settings.context_messages
            turn.base = transcripts.read(self.artifacts, transcript, keep) if transcript is not None else Conversation()

    async def _act(self, req: ModelRequest, turn: _Turn) -> tuple[Completion, list[Message]]:
        config, base = turn.config, turn.base
        assert config is not None and base is not None
        self._remember(req, config, base)
        turn.settings = config.settings if req.choice == 0 else config.fallbacks[req.choice - 1]
        note_model_settings(turn.settings)
        provider = self._provider(turn.settings)
        async with heartbeating(), reply_stream(req.step, config.settings.stream) as deltas:
            turn.deltas = deltas
            return await self._call(req, turn, config, turn.settings, provider, base, deltas)

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
        turn: _Turn,
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
        assert turn.bill is not None
        within = _within_budget(req, config, settings, messages, turn.bill.earlier)
        within = _within_tenant_cap(config, within, messages, turn.bill.tenant_spent)
        done = await provider.complete(
            ModelCall(
                key=turn.key,
                settings=within,
                tools=config.tools,
                output=config.output,
                messages=messages,
                turn=base.turns + _turns(new),
                step=req.step,
                deltas=deltas,
                meter=turn.bill.sending(settings, messages, config.tools, config),
            )
        )
        message = done.message
        if req.choice:  # the transcript says which model answered the turn
            message = message.model_copy(update={"answered_by": f"{settings.provider}/{done.model or settings.model}"})
        done = dataclasses.replace(done, message=message)
        return done, new + [message]

    def _finish(self, req: ModelRequest, turn: _Turn, done: Completion, added: list[Message]) -> ModelReply:
        """In a thread, before the ledger records the reply: the step's transcript segment written
        (in that order: a recorded reply always names a stored transcript)."""
        config, settings, base = turn.config, turn.settings, turn.base
        assert config is not None and settings is not None and base is not None
        ref = transcripts.write(self.artifacts, base, added, prev=req.transcript)
        natural = "tool_calls" if done.message.tool_calls else "stop"
        reply = ModelReply(  # finish reason and model only when the message and settings do not say them
            message=done.message,
            usage=done.usage,
            transcript=ref.digest,
            finish_reason=None if done.finish_reason in (None, natural) else done.finish_reason,
            model="" if done.model in ("", settings.model) else done.model,
        )
        if billing.answered(turn.bill, done.usage) is not None:
            reply.billed = billing.bill(self.billing, turn.bill, turn.received())
        if config.output is not None and not done.message.tool_calls and done.finish_reason != "length":
            reply.output, reply.output_error = outputs.check(config.output, done.message.content)
        turn.extended = base.extended(added, ref.digest, ref.size or 0, config.settings.context_messages)
        return reply

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
    req: ModelRequest, config: ModelCallConfig, settings: ModelSettings, messages: list[Message], earlier: Billed | None
) -> ModelSettings:
    """The run's settings with the output capped at what is left of its budget once the call's
    earlier attempts are paid for (`earlier`); a call whose prompt alone would not fit is refused
    (non-retryable `BudgetExhausted`: the run ends BUDGET_EXHAUSTED without paying for it)."""
    if req.max_tokens is None and req.max_cost_usd is None:
        return settings
    prompt = budget.prompt_estimate(billing.prompt_chars(messages, config.tools), len(messages))
    tokens_left, cost_left = billing.allowance(req.max_tokens, req.max_cost_usd, earlier)
    cap = budget.output_cap(tokens_left, cost_left, prompt, settings)
    if isinstance(cap, str):
        if earlier is not None and earlier.attempts:
            cap = f"{cap}, after {earlier.attempts} failed attempt(s) of this call billed ${earlier.cost_usd:.4f}"
        raise ApplicationError(cap, type=ErrorType.BUDGET_EXHAUSTED, non_retryable=True)
    if cap == settings.max_output_tokens:
        return settings
    return settings.model_copy(update={"max_output_tokens": cap})


def _within_tenant_cap(
    config: ModelCallConfig, settings: ModelSettings, messages: list[Message], spent: float | None
) -> ModelSettings:
    """`settings` with the output capped at what is left of the run's tenant's cost cap for the day
    (`spent`: what the tenant was billed today, across its runs); a call that would cross it is not
    made (non-retryable `BudgetExhausted`, naming the cap)."""
    cap_usd = config.daily_cap_usd
    if cap_usd is None or spent is None:
        return settings
    prompt = budget.prompt_estimate(billing.prompt_chars(messages, config.tools), len(messages))
    cap = budget.output_cap(None, cap_usd - spent, prompt, settings) if spent < cap_usd else "nothing is left"
    if isinstance(cap, str):
        raise ApplicationError(
            f"tenant {config.tenant!r} reached its daily cost cap of ${cap_usd:g} (RATCHET_TENANT_DAILY_USD): "
            f"${spent:.4f} billed today (UTC) across its runs; {cap}",
            type=ErrorType.BUDGET_EXHAUSTED,
            non_retryable=True,
        )
    return settings if cap == settings.max_output_tokens else settings.model_copy(update={"max_output_tokens": cap})


def _replayed(result: dict, config: ModelCallConfig | None) -> ModelReply:
    """A reply the ledger holds, as a retry returns it: an earlier attempt streamed it, perhaps in
    part, so the workflow publishes it whole, superseding that."""
    reply = ModelReply.model_validate(result)
    attempt = activity.info().attempt
    if attempt > 1 and (config is None or config.settings.stream):
        reply.streamed = Streamed(attempt=attempt)
    return reply


def _turns(messages: list[Message]) -> int:
    return sum(m.role == "assistant" for m in messages)


def _owner() -> str | None:
    """The run a model call belongs to (None outside an activity: tests and the bench's micro)."""
    try:
        return activity.info().workflow_id
    except RuntimeError:
        return None
