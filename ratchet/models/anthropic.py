"""The anthropic provider: Anthropic's Messages API through the official `anthropic` SDK (the
`anthropic` extra: `pip install 'ratchet-agents[anthropic]'`).

The conversation is rendered in the API's shape, and the reply read back, by
ratchet/models/anthropic_messages.py. Prompt caching is on unless a run's `model.options` say
`{"prompt_caching": false}`.

`stop_reason` `max_tokens` is a reply cut off (`finish_reason` "length"); `pause_turn` (a long
server-side turn) is continued in the same call, at most MAX_CONTINUATIONS times; `refusal` fails
the run non-retryably, as a retry would send the same request. The SDK's own retries are off:
Temporal's retry policy governs, and ratchet/models/anthropic_errors.py decides what is retried.

A call that streams (`ModelCall.deltas`) reads the raw events of `messages.create(stream=True)`:
text as it arrives, and each tool call whole when its block closes, its arguments as the reply
records them. The reply is assembled here, by content block index (`StreamedReply`), not by the
SDK's `messages.stream`, whose snapshot parses a block's JSON in partial mode (JSON that is not
valid silently loses its unfinished values: `{"path": "a", "content": "b}}` became `{"path": "a"}`,
and a write_file without content failed again and again; JSON it cannot start to parse raises
mid-stream) and appends a block for every `content_block_start`, also one that repeats an open
block's index, as llama-server's last event batch does (a second tool call with no input). Here a
block's JSON is parsed whole when its block stops: valid, it is recorded as `messages.create`
would record it; not, as written (the model is told its arguments were not valid JSON, as with any
provider). A stream that ends without `message_stop` is cut (retried, as a dropped connection is);
an `error` event mid-stream is retried. A call with an output schema does not stream: its answer
is the `final_answer` tool's arguments, not the text the model writes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from pydantic import Field, SecretStr
from temporalio.exceptions import ApplicationError

from ratchet.contracts import ModelSettings, Strict, ToolCallRequest
from ratchet.models.anthropic_messages import (
    arguments_json,
    from_anthropic,
    input_object,
    render,
    sdk_arguments,
    USAGE_FIELDS,
    usage_of,
)
from ratchet.models.provider import (
    Completion,
    Deltas,
    ModelCall,
    PlanContext,
    answer_from_tool,
    check_options,
)
from ratchet.models.settings import Headers, ProviderSettings, env, load

MAX_CONTINUATIONS = 3
"""`pause_turn` replies continued within one model call before it gives up (retryable)."""
INSTALL = "pip install 'ratchet-agents[anthropic]'"


class AnthropicSettings(ProviderSettings):
    """The anthropic provider's endpoint, read from the variables the anthropic SDK reads."""

    api_key: SecretStr | None = Field(None, validation_alias=env("ANTHROPIC_API_KEY"))
    auth_token: SecretStr | None = Field(
        None, validation_alias=env("ANTHROPIC_AUTH_TOKEN"), description="A bearer token instead of an API key."
    )
    base_url: str | None = Field(None, validation_alias=env("ANTHROPIC_BASE_URL"))
    version: str | None = Field(
        None,
        validation_alias=env("ANTHROPIC_VERSION"),
        description="The `anthropic-version` header; unset: the SDK's.",
    )
    headers: Headers = Field(default_factory=dict, validation_alias=env("ANTHROPIC_CUSTOM_HEADERS"))
    model: str = Field("claude-sonnet-4-5", min_length=1, validation_alias=env("ANTHROPIC_MODEL"))
    max_tokens: int = Field(
        4096,
        ge=1,
        validation_alias=env("ANTHROPIC_MAX_TOKENS"),
        description="A reply's output limit when the run names none (the API requires one).",
    )

    @property
    def configured(self) -> bool:
        return self.api_key is not None or self.auth_token is not None


class AnthropicOptions(Strict):
    """A run's `model.options` for the anthropic provider."""

    prompt_caching: bool = True
    """Mark the tool list, the system prompt and the conversation so far for the prompt cache."""


def sdk_missing() -> bool:
    try:
        import anthropic  # noqa: F401
    except ImportError:
        return True
    return False


class AnthropicProvider:
    name = "anthropic"

    def __init__(self, settings: AnthropicSettings | None = None) -> None:
        self.settings = settings if settings is not None else load(AnthropicSettings)
        self._client: Any = None

    @property
    def default_model(self) -> str:
        return self.settings.model

    def plan(self, settings: ModelSettings, options: dict[str, Any], context: PlanContext) -> ModelSettings:
        given = check_options(AnthropicOptions, options)
        return settings.model_copy(update={"options": given.model_dump(exclude_defaults=True)})

    def unavailable(self, settings: ModelSettings) -> str | None:
        if sdk_missing():
            return f"the anthropic SDK is not installed on this worker ({INSTALL})"
        if not self.settings.configured:
            return "this worker has no Anthropic key; set ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN) on the worker"
        return None

    def client(self) -> Any:
        """One client per worker; its own retries are off so Temporal's retry policy governs."""
        if self._client is None:
            import anthropic

            headers = self.settings.header_values()
            if self.settings.version:
                headers["anthropic-version"] = self.settings.version
            key, token = self.settings.api_key, self.settings.auth_token
            self._client = anthropic.AsyncAnthropic(
                api_key=key.get_secret_value() if key else None,
                auth_token=token.get_secret_value() if token else None,
                base_url=self.settings.base_url,
                default_headers=headers or None,
                max_retries=0,
            )
        return self._client

    async def complete(self, call: ModelCall) -> Completion:
        import anthropic
        import httpx2

        from ratchet.models.anthropic_errors import classify

        caching = call.settings.options.get("prompt_caching", True)
        request = render(call, self.settings.max_tokens, caching)
        deltas = call.deltas if call.output is None else None
        content: list[Any] = []
        streamed: list[ToolCallRequest] = []
        try:
            for _ in range(MAX_CONTINUATIONS + 1):
                if deltas is None:
                    create = self.client().messages.create
                    reply = await create(**sdk_arguments(create, request), timeout=call.settings.timeout_s)
                    call.meter.usage = usage_of(reply.usage)
                else:
                    reply, calls = await self._streamed(request, call, deltas, len(streamed))
                    streamed += calls
                content += reply.content
                if reply.stop_reason != "pause_turn":
                    break
                request["messages"] = [*request["messages"], {"role": "assistant", "content": reply.content}]
            else:
                raise ApplicationError(
                    f"the model paused its turn {MAX_CONTINUATIONS + 1} times (stop_reason pause_turn)",
                    type="ModelPaused",
                )
        except (anthropic.AnthropicError, httpx2.HTTPError) as exc:
            body = getattr(exc, "body", None)
            if isinstance(body, dict) and isinstance(body.get("usage"), dict):  # billed though it failed
                call.meter.usage = usage_of(SimpleNamespace(**{**dict.fromkeys(USAGE_FIELDS), **body["usage"]}))
            raise classify(exc) from None  # `from None`: see openai.py (the chain overflows the failure)
        if reply.stop_reason == "refusal":
            raise ApplicationError(
                "the model refused to continue (stop_reason refusal); the same request would be refused again",
                type="ModelRefused",
                non_retryable=True,
            )
        message = from_anthropic(content, streamed if deltas is not None else None)
        return Completion(
            message=answer_from_tool(message) if call.output else message,
            usage=usage_of(reply.usage),
            finish_reason="length" if reply.stop_reason == "max_tokens" else None,
            model=reply.model or "",
        )

    async def _streamed(
        self, request: dict[str, Any], call: ModelCall, deltas: Deltas, earlier: int
    ) -> tuple[Any, list[ToolCallRequest]]:
        """One streamed request's reply and its tool calls, assembled from the raw events
        (`StreamedReply`); `earlier`: tool calls earlier in the reply (a continuation). The usage
        so far (message_start's, then message_delta's) goes to the call's meter as it comes."""
        create = self.client().messages.create
        reply = StreamedReply(deltas, earlier)
        stream = await create(**sdk_arguments(create, request), stream=True, timeout=call.settings.timeout_s)
        async with stream:
            async for event in stream:
                reply.feed(event)
                if event.type in ("message_start", "message_delta") and reply.started is not None:
                    call.meter.usage = usage_of(reply.started.usage)
        if not reply.stopped or reply.started is None:
            raise ApplicationError("the Anthropic API's stream ended before the reply finished", type="ModelStreamCut")
        return reply.message(), reply.calls()


class StreamedReply:
    """A streamed reply, from the API's raw events, by content block index: text blocks' text
    (each piece handed to `deltas` as it comes), tool_use blocks (`_ToolUse`: the first
    `content_block_start` of an index names it, a repeated one is the same block; its
    `input_json_delta` pieces joined), the stop reason and usage. A tool call is announced to
    `deltas` when its block stops, or, if it never stops, when the reply is taken."""

    def __init__(self, deltas: Deltas, earlier: int) -> None:
        self.deltas, self.earlier = deltas, earlier
        self.started: Any = None
        """`message_start`'s message: id, model, usage so far."""
        self.texts: dict[int, list[str]] = {}
        self.uses: dict[int, _ToolUse] = {}
        self._announced: set[int] = set()
        self.stop_reason: Any = None
        """The SDK's `StopReason` (this module imports the SDK only when a call is made)."""
        self.stopped = False

    def feed(self, event: Any) -> None:
        if event.type == "message_start":
            self.started = event.message
        elif event.type == "content_block_start":
            self._start(event.index, event.content_block)
        elif event.type == "content_block_delta":
            self._delta(event.index, event.delta)
        elif event.type == "content_block_stop" and event.index in self.uses:
            self._announce(event.index)
        elif event.type == "message_delta":
            self.stop_reason = event.delta.stop_reason
            self._usage(event.usage)
        elif event.type == "message_stop":
            self.stopped = True

    def _start(self, index: int, block: Any) -> None:
        if index in self.texts or index in self.uses:
            return  # the block is open: a repeated start (llama-server's last batch) adds nothing
        if block.type == "text":
            self.texts[index] = [block.text] if block.text else []
            if block.text:
                self.deltas.text(block.text)
        elif block.type == "tool_use":
            given = getattr(block, "input", None)
            self.uses[index] = _ToolUse(block.id, block.name, given, len(self.uses))

    def _delta(self, index: int, delta: Any) -> None:
        if delta.type == "text_delta" and index not in self.uses:  # text of a block never started is text too
            self.texts.setdefault(index, []).append(delta.text)
            self.deltas.text(delta.text)
        elif delta.type == "input_json_delta" and index in self.uses:
            self.uses[index].parts.append(delta.partial_json)

    def _usage(self, usage: Any) -> None:
        """A `message_delta`'s counts are totals: they replace message_start's (absent ones stay)."""
        if self.started is None:
            return
        for name in ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"):
            value = getattr(usage, name, None)
            if value is not None:
                setattr(self.started.usage, name, value)

    def _announce(self, index: int) -> None:
        if index not in self._announced:
            self._announced.add(index)
            use = self.uses[index]
            self.deltas.tool_call(self.earlier + use.position, use.name, use.arguments())

    def calls(self) -> list[ToolCallRequest]:
        """Every tool call of the reply in block order; those whose block never stopped announced now."""
        for index in self.uses:
            self._announce(index)
        ordered = sorted(self.uses.values(), key=lambda u: u.position)
        return [ToolCallRequest(id=u.id, name=u.name, arguments=u.arguments()) for u in ordered]

    def message(self) -> Any:
        """The reply as the SDK's `Message`, as `messages.create` returns it (a continuation sends its
        content back)."""
        from anthropic.types import Message as Reply, TextBlock, ToolUseBlock

        blocks: dict[int, Any] = {i: TextBlock(type="text", text="".join(t)) for i, t in self.texts.items()}
        for i, use in self.uses.items():
            blocks[i] = ToolUseBlock(type="tool_use", id=use.id, name=use.name, input=input_object(use.arguments()))
        started = self.started
        return Reply.model_construct(
            id=getattr(started, "id", ""),
            type="message",
            role="assistant",
            model=getattr(started, "model", ""),
            content=[blocks[i] for i in sorted(blocks)],
            stop_reason=self.stop_reason,
            stop_sequence=None,
            usage=started.usage,
        )


@dataclass
class _ToolUse:
    id: str
    name: str
    start_input: Any
    """The input `content_block_start` carried (the API's `{}`; llama-server sends none)."""
    position: int
    """Its place among the reply's tool calls."""
    parts: list[str] = field(default_factory=list)

    def arguments(self) -> str:
        """As `messages.create`'s reply would record the input; JSON that is not valid, as written."""
        text = "".join(self.parts)
        if not text.strip():
            return arguments_json(self.start_input if self.start_input is not None else {})
        try:
            return arguments_json(json.loads(text))
        except ValueError:
            return text
