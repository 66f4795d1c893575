"""The openai provider: any OpenAI-compatible chat-completions endpoint (OpenAI, Azure, vLLM,
llama.cpp, Ollama) through the official `openai` client.

The client's own retries are off: Temporal's retry policy governs, and ratchet/models/openai_errors.py
decides what is retried. The call's idempotency key goes along as `Idempotency-Key`.

A call that streams (`ModelCall.deltas`) asks for `stream=True` with the usage chunk and assembles
the same `Completion` from the chunks; a stream that ends before a choice finished is cut, and
retried as a dropped connection is.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, cast

from pydantic import Field, SecretStr
from temporalio.exceptions import ApplicationError

from ratchet.contracts import Message, ModelSettings, ToolCallRequest, ToolSchema, Usage
from ratchet.models.openai_errors import classify
from ratchet.models.provider import Completion, Deltas, ModelCall, PlanContext, ProviderOptionsError
from ratchet.models.settings import Headers, ProviderSettings, env, load

if TYPE_CHECKING:  # the client is imported when a call needs it: a worker without openai runs saves ~20 MiB
    import openai
    from openai.types.chat import ChatCompletionMessageParam


class OpenAISettings(ProviderSettings):
    """The openai provider's endpoint, read from the variables the openai client reads."""

    api_key: SecretStr | None = Field(None, validation_alias=env("OPENAI_API_KEY"))
    base_url: str | None = Field(
        None,
        validation_alias=env("OPENAI_BASE_URL"),
        description="Any OpenAI-compatible endpoint (Azure, vLLM, llama.cpp, Ollama); unset: OpenAI's.",
    )
    organization: str | None = Field(None, validation_alias=env("OPENAI_ORG_ID"))
    project: str | None = Field(None, validation_alias=env("OPENAI_PROJECT_ID"))
    headers: Headers = Field(default_factory=dict, validation_alias=env("OPENAI_CUSTOM_HEADERS"))
    model: str = Field(
        "gpt-4o-mini",
        min_length=1,
        validation_alias=env("OPENAI_MODEL"),
        description="The model of a run whose profile and input name none.",
    )

    @property
    def configured(self) -> bool:
        return self.api_key is not None or self.base_url is not None


class OpenAIProvider:
    name = "openai"

    def __init__(self, settings: OpenAISettings | None = None) -> None:
        self.settings = settings if settings is not None else load(OpenAISettings)
        self._client: openai.AsyncOpenAI | None = None

    @property
    def default_model(self) -> str:
        return self.settings.model

    def plan(self, settings: ModelSettings, options: dict[str, Any], context: PlanContext) -> ModelSettings:
        if options:
            raise ProviderOptionsError(next(iter(options)), "the openai provider takes no options")
        return settings

    def unavailable(self, settings: ModelSettings) -> str | None:
        if self.settings.configured:
            return None
        return (
            "this worker has no OpenAI endpoint; set OPENAI_API_KEY (or OPENAI_BASE_URL for a compatible "
            "server) on the worker, or start the run with provider 'scripted' and options.script"
        )

    def client(self) -> openai.AsyncOpenAI:
        """One client per worker; its own retries are off so Temporal's retry policy governs."""
        if self._client is None:
            import openai

            key = self.settings.api_key
            self._client = openai.AsyncOpenAI(
                api_key=key.get_secret_value() if key else "not-needed",
                base_url=self.settings.base_url,
                organization=self.settings.organization,
                project=self.settings.project,
                default_headers=self.settings.header_values() or None,
                max_retries=0,
            )
        return self._client

    async def complete(self, call: ModelCall) -> Completion:
        import openai

        settings = call.settings
        kwargs: dict[str, Any] = {}
        if settings.temperature is not None:
            kwargs["temperature"] = settings.temperature
        if settings.max_output_tokens is not None:
            kwargs["max_tokens"] = settings.max_output_tokens
        if call.tools:
            kwargs["tools"] = [to_openai_tool(t) for t in call.tools]
        if call.output is not None:  # structured outputs: the final answer is JSON matching the schema
            kwargs["response_format"] = {
                "type": "json_schema",
                "json_schema": {
                    "name": _schema_name(call.output.name),
                    "schema": call.output.json_schema,
                    "strict": True,
                },
            }
        request = dict(
            model=settings.model,
            messages=[to_openai(m) for m in call.messages],
            timeout=settings.timeout_s,
            extra_headers={"Idempotency-Key": call.key},
            **kwargs,
        )
        try:
            if call.deltas is not None:
                return await self._streamed(request, call)
            completion = await self.client().chat.completions.create(**request)
            call.meter.usage = usage_of(completion.usage)
            choice = completion.choices[0]
        except (openai.OpenAIError, ValueError, IndexError, TypeError) as exc:
            call.meter.usage = _error_usage(exc) or call.meter.usage  # billed though it failed
            # `from None`: the openai exception chain and its stack traces (~6 KB) would exceed
            # the server's size limit for a retrying activity's last failure, hiding the reason.
            raise classify(exc) from None
        usage = call.meter.usage
        return Completion(
            message=from_openai(choice.message),
            usage=usage,
            finish_reason=choice.finish_reason,
            model=completion.model or "",
        )

    async def _streamed(self, request: dict[str, Any], call: ModelCall) -> Completion:
        assert call.deltas is not None
        stream = await self.client().chat.completions.create(
            **request, stream=True, stream_options={"include_usage": True}
        )
        reply = _Assembly()
        async with stream:
            async for chunk in stream:
                reply.add(chunk, call.deltas)
                if chunk.usage is not None:
                    call.meter.usage = reply.usage
        if reply.finish_reason is None:
            raise ApplicationError("model endpoint's stream ended before the reply finished", type="ModelStreamCut")
        return reply.completion()


class _Assembly:
    """A streamed reply, put together from its chunks as the non-streaming reply would be."""

    def __init__(self) -> None:
        self.content: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.finish_reason: str | None = None
        self.model = ""
        self.usage = Usage(prompt_tokens=0, completion_tokens=0)

    def add(self, chunk: Any, deltas: Deltas) -> None:
        self.model = chunk.model or self.model
        if chunk.usage is not None:
            self.usage = usage_of(chunk.usage)
        for choice in chunk.choices[:1]:
            delta = choice.delta
            if delta.content:
                self.content.append(delta.content)
                deltas.text(delta.content)
            for part in delta.tool_calls or []:
                call = self.calls.setdefault(part.index, {"id": None, "name": "", "arguments": ""})
                function = part.function
                call["id"] = call["id"] or part.id
                name = (function.name or "") if function is not None else ""
                arguments = (function.arguments or "") if function is not None else ""
                call["name"] += name
                call["arguments"] += arguments
                deltas.tool_call(part.index, name, arguments)
            if choice.finish_reason is not None:
                self.finish_reason = choice.finish_reason

    def completion(self) -> Completion:
        calls = [
            ToolCallRequest(id=c["id"] or f"call_{j}", name=c["name"], arguments=c["arguments"])
            for j, c in enumerate(self.calls[i] for i in sorted(self.calls))
            if c["name"]
        ]
        content = "".join(self.content) if self.content else None
        return Completion(
            message=Message(role="assistant", content=content, tool_calls=calls),
            usage=self.usage,
            finish_reason=self.finish_reason,
            model=self.model,
        )


def _error_usage(exc: Exception) -> Usage | None:
    """The usage an error's body carries, if any (the client keeps only the body's `error` object,
    so the whole body is read again from the response)."""
    import openai

    if not isinstance(exc, openai.APIStatusError):
        return None
    try:
        body = exc.response.json()
    except ValueError:
        return None
    return usage_of(body["usage"]) if isinstance(body, dict) and isinstance(body.get("usage"), dict) else None


def usage_of(usage: Any) -> Usage:
    """OpenAI's usage (an SDK object, or an error body's dict): cached input counted apart."""
    if usage is None:
        return Usage()
    get = usage.get if isinstance(usage, dict) else lambda name: getattr(usage, name, None)
    details = get("prompt_tokens_details")
    cached = (details.get("cached_tokens") if isinstance(details, dict) else getattr(details, "cached_tokens", 0)) or 0
    return Usage(
        prompt_tokens=get("prompt_tokens") or 0,
        completion_tokens=get("completion_tokens") or 0,
        cache_read_tokens=cached,
    )


def _schema_name(name: str) -> str:
    """`response_format`'s name: letters, digits, `_` and `-`, at most 64."""
    return "".join(c if c.isalnum() or c in "_-" else "_" for c in name)[:64] or "output"


def to_openai_tool(tool: ToolSchema) -> dict[str, Any]:
    """A neutral tool schema as an OpenAI function tool."""
    return {
        "type": "function",
        "function": {"name": tool.name, "description": tool.description, "parameters": tool.parameters},
    }


def to_openai(message: Message) -> ChatCompletionMessageParam:
    out: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        out["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": json_arguments(c.arguments)}}
            for c in message.tool_calls
        ]
    if message.tool_call_id is not None:
        out["tool_call_id"] = message.tool_call_id
    return cast("ChatCompletionMessageParam", out)  # the shape of the message's role


INVALID_ARGUMENTS = "invalid_json_arguments"
"""The key under which arguments that were not JSON go back to the endpoint, as the model wrote them."""


def json_arguments(arguments: str) -> str:
    """Valid JSON for a historical tool call: endpoints parse every past call's arguments (llama.cpp
    answers 500 for a call cut off at the output limit, vLLM 400), so arguments that are not JSON
    go back wrapped, `{"invalid_json_arguments": "<what the model wrote>"}`; the tool message after
    the call already told the model why it did not run."""
    try:
        json.loads(arguments)
        return arguments
    except ValueError:
        return json.dumps({INVALID_ARGUMENTS: arguments}, ensure_ascii=False)


def from_openai(message: Any) -> Message:
    calls = [
        ToolCallRequest(
            id=c.id or f"call_{j}",
            name=c.function.name,
            arguments=c.function.arguments
            if isinstance(c.function.arguments, str)
            else json.dumps(c.function.arguments),
        )
        for j, c in enumerate(message.tool_calls or [])
        if getattr(c, "function", None) is not None
    ]
    return Message(role="assistant", content=message.content, tool_calls=calls)
