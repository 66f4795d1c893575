"""`model.call`: one model turn, through the openai client or the scripted provider.

The workflow sends only what is new since the last call plus a reference to the transcript so
far (in the artifact store), so the bytes each step adds to history do not grow with the step.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from typing import Any

import openai
from temporalio import activity

from activities.heartbeat import heartbeating
from activities.ledger import EntryStatus, Ledger
from activities.model_errors import classify
from activities.prepare import RunPreparer
from activities.scripted import scripted_reply
from ratchet.artifacts import ArtifactStore, get_json, put_json
from ratchet import keys
from ratchet.contracts import ArtifactRef, Message, ModelCallConfig, ModelReply, ModelRequest, ToolCallRequest, Usage
from ratchet.settings import Settings


class ModelActivities:
    def __init__(
        self, settings: Settings, artifacts: ArtifactStore, ledger: Ledger | None = None,
        preparer: RunPreparer | None = None,
    ) -> None:
        self.preparer = preparer
        self.settings = settings
        self.artifacts = artifacts
        self.ledger = ledger
        self.transcripts = TranscriptCache()
        self.configs: OrderedDict[str, ModelCallConfig] = OrderedDict()
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
        if req.key is None:
            req.key = keys.model_key(activity.info().workflow_id, req.step)
        plan = None
        if req.first is not None:  # before the ledger: planning claims the workflow id for this run
            assert self.preparer is not None, "this worker cannot plan runs"
            plan = await self.preparer.prepare(req.first)
            req.call_ref = plan.call_ref
            req.new_messages = [
                Message(role="system", content=plan.system_prompt), Message(role="user", content=req.first.run.objective),
            ]
        if self.ledger is not None:
            entry = self.ledger.begin(req.key)
            if entry is not None and entry.status == EntryStatus.COMPLETED:
                cached = ModelReply.model_validate(entry.result)
                req.settings = self._config(req).settings  # for the metrics interceptor
                if plan is not None:  # recorded by an earlier run of the chain planned by run.prepare
                    cached.plan = cached.plan or plan
                return cached
        async with heartbeating():
            reply = await self._call(req)
        reply.plan = plan
        if self.ledger is not None:
            self.ledger.complete(req.key, reply.model_dump(mode="json"))
        return reply

    async def _call(self, req: ModelRequest) -> ModelReply:
        config = self._config(req)
        req.settings = config.settings  # resolved in place: the metrics interceptor prices the call by it
        transcript = self._transcript(req)
        if config.settings.provider == "scripted":
            assert config.settings.script_ref is not None, "scripted provider without a script"
            script = get_json(self.artifacts, config.settings.script_ref)
            message, usage = scripted_reply(script, transcript, req.step)
            finish, model = ("tool_calls" if message.tool_calls else "stop"), "scripted"
        else:
            message, usage, finish, model = await self._openai(req, config, transcript)
        transcript.append(message)
        ref = put_json(self.artifacts, [m.model_dump(exclude_defaults=True) for m in transcript])
        self.transcripts.put(ref.digest, transcript, ref.size or 0, owner=_owner())
        return ModelReply(message=message, usage=usage, finish_reason=finish, transcript=ref.digest, model=model)

    def _config(self, req: ModelRequest) -> ModelCallConfig:
        """The run's settings and tool schemas: one artifact per run, parsed once per worker."""
        if req.call_ref is None:
            assert req.settings is not None and req.tools_ref is not None, "model request without settings"
            return ModelCallConfig(settings=req.settings, tools=get_json(self.artifacts, req.tools_ref))
        config = self.configs.get(req.call_ref)
        if config is None:
            config = ModelCallConfig.model_validate(get_json(self.artifacts, ArtifactRef.json(req.call_ref)))
            self.configs[req.call_ref] = config
            while len(self.configs) > 256:
                self.configs.popitem(last=False)
        self.configs.move_to_end(req.call_ref)
        return config

    def _transcript(self, req: ModelRequest) -> list[Message]:
        earlier: list[Message] = []
        if req.transcript is not None:
            cached = self.transcripts.get(req.transcript)
            if cached is None:
                cached = [Message.model_validate(m) for m in get_json(self.artifacts, ArtifactRef.json(req.transcript))]
            earlier = cached
        return list(earlier) + [self._inline(m) for m in req.new_messages]

    def _inline(self, message: Message) -> Message:
        """A long tool output travels through history as a reference; the model sees all of it."""
        if message.content_ref is None:
            return message
        full = self.artifacts.get(message.content_ref).decode(errors="replace")
        return message.model_copy(update={"content": full, "content_ref": None})

    async def _openai(self, req: ModelRequest, config: ModelCallConfig, transcript: list[Message]):
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
                extra_headers={"Idempotency-Key": req.key or ""},
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


def _owner() -> str | None:
    """The run a model call belongs to (None outside an activity: tests and the bench's micro)."""
    try:
        return activity.info().workflow_id
    except RuntimeError:
        return None


class TranscriptCache:
    """Parsed transcripts by digest, so a run's next model call on this worker skips re-reading
    and re-validating the whole conversation (content-addressed: an entry can never be stale).

    One entry per run (`owner`): a run continues from its latest transcript, so keeping its older
    ones only held memory that grew with the run (bench: long-run RSS +14 %). After a rollback the
    checkpoint's transcript is read from the artifact store once."""

    def __init__(self, max_bytes: int = 64 * 1024 * 1024) -> None:
        self.max_bytes = max_bytes
        self.entries: OrderedDict[str, tuple[list[Message], int]] = OrderedDict()
        self.bytes = 0
        self.latest: dict[str, str] = {}
        """owner -> the digest of its latest transcript."""

    def get(self, digest: str) -> list[Message] | None:
        entry = self.entries.get(digest)
        if entry is None:
            return None
        self.entries.move_to_end(digest)
        return entry[0]

    def put(self, digest: str, transcript: list[Message], size: int, owner: str | None = None) -> None:
        if owner is not None:
            previous = self.latest.pop(owner, None)
            if previous is not None and previous != digest:
                self._drop(previous)
        if digest in self.entries:
            if owner is not None:
                self.latest[owner] = digest
            return
        if size > self.max_bytes:
            return
        self.entries[digest] = (list(transcript), size)
        self.bytes += size
        if owner is not None:
            self.latest[owner] = digest
        while self.bytes > self.max_bytes:
            self._drop(next(iter(self.entries)))

    def _drop(self, digest: str) -> None:
        entry = self.entries.pop(digest, None)
        if entry is not None:
            self.bytes -= entry[1]


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
