"""The model-provider seam: what `run.prepare` and `model.call` need from any model backend.

A provider is registered on the worker by name (`openai`, `anthropic` and `scripted` ship); a run's
`ModelSettings.provider` names one, checked when the run is planned. Nothing vendor-shaped crosses
the seam: tools arrive as neutral `ToolSchema`s and each provider renders its own wire format; a
provider's settings (key, base URL, headers) are its own, read from its own environment variables
(`ProviderSettings`); a run's provider-specific options reach only the provider (`plan`). A fourth
provider (another vendor's SDK, a local runtime) is a class with `name`, `default_model`, `plan`,
`unavailable` and `complete`, registered through the plugin's options: no contract changes.

Providers do not retry: Temporal's retry policy does, so a provider raises `ApplicationError`s
classified on purpose (retryable for transient failures, `non_retryable=True` for ones that will
recur), as ratchet/models/openai_errors.py does for the openai client.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel, SecretStr, ValidationError

from ratchet.contracts import Message, ModelSettings, OutputSpec, ToolSchema, Usage
from ratchet.core.outputs import FINAL_ANSWER
from ratchet.stores.artifacts import ArtifactStore

__all__ = [
    "Completion",
    "ModelCall",
    "ModelProvider",
    "PlanContext",
    "ProviderOptionsError",
    "ProviderRegistry",
    "ToolSchema",
    "UsageMeter",
    "check_options",
]


@dataclass(frozen=True)
class ModelCall:
    """One model turn, as the model activity hands it to a provider."""

    key: str
    """The call's idempotency key (`{workflow id}/{step}/model`), stable across retries; providers
    whose endpoint deduplicates send it along (the openai provider as `Idempotency-Key`)."""
    settings: ModelSettings
    tools: list[ToolSchema]
    """The run's tools, neutral: the provider renders them in its wire format."""
    messages: list[Message]
    """What the model is sent: the context window of the conversation, long contents inlined."""
    turn: int
    """Assistant messages in the whole conversation before this call."""
    step: int
    deltas: Deltas | None = None
    """Where the reply goes while the model writes it (None: the run does not stream it). A
    provider that streams hands it each piece; the `Completion` it returns is the whole reply,
    exactly what it returns without `deltas`."""

    summary: bool = False
    """The call summarises the conversation for a session's compaction (`model.compact`): its
    last message asks for the summary, no tools are offered, and the reply is plain text."""

    meter: UsageMeter = field(default_factory=lambda: UsageMeter())
    """Where the provider puts the usage it has been told so far (a stream's usage chunk, an error
    body's usage): a call that fails is billed from it (activities/billing.py), else estimated."""

    output: OutputSpec | None = None
    """The run's output schema: the final answer must be JSON matching it. A provider uses its native
    mechanism (OpenAI: `response_format` json_schema), else offers the `final_answer_tool` and turns
    its call into the answer (`answer_from_tool`)."""


@dataclass
class UsageMeter:
    """A model call's usage as the provider counted it, while the call runs."""

    usage: Usage | None = None
    """The provider's latest count (None: it sent none yet)."""
    sent: bool = False
    """The request went out (the activity sets it): an attempt that failed before is not billed."""


class Deltas(Protocol):
    """A reply as it is written (activities/streaming.py publishes it to the run's stream)."""

    def text(self, text: str) -> None:
        """The next piece of the reply's text."""
        ...

    def tool_call(self, index: int, name: str = "", arguments: str = "") -> None:
        """The next piece of tool call `index` (its position in the reply): its name once known,
        the next characters of its JSON arguments."""
        ...


def final_answer_tool(output: OutputSpec) -> ToolSchema:
    """The tool a provider without a structured-output mode offers for a typed final answer."""
    return ToolSchema(
        name=FINAL_ANSWER,
        description=f"Give your final answer ({output.name}) when you are done: its arguments are the answer.",
        parameters=output.json_schema,
    )


def answer_from_tool(message: Message) -> Message:
    """A reply whose only tool call is `final_answer`: the answer, its arguments as the content. Next
    to other calls it is premature (the model answers before seeing their results): dropped."""
    answers = [c for c in message.tool_calls if c.name == FINAL_ANSWER]
    if not answers:
        return message
    others = [c for c in message.tool_calls if c.name != FINAL_ANSWER]
    if others:
        return message.model_copy(update={"tool_calls": others})
    return message.model_copy(update={"content": answers[0].arguments, "tool_calls": []})


@dataclass(frozen=True)
class Completion:
    message: Message
    usage: Usage
    finish_reason: str | None = None
    """"length" when the reply was cut at the output limit; else the provider's own word, or None."""
    model: str = ""
    """The model the provider says answered ("" when it names none)."""


@dataclass(frozen=True)
class PlanContext:
    """What a provider may use when a run is planned (`ModelProvider.plan`)."""

    artifacts: ArtifactStore
    """Where a provider stores what its runs share (the scripted provider: the script)."""
    read_workspace_file: Callable[[str, int], str]
    """`(relative path, max bytes) -> text` of a file in the run's workspace; raises
    `ProviderOptionsError` saying why it cannot."""


class ProviderOptionsError(ValueError):
    """A run's `model.options` the provider cannot use. The run fails at once with
    `InvalidInput: model.options.<option>: <problem>` (`model.options: <problem>` without an option)."""

    def __init__(self, option: str | None, problem: str) -> None:
        super().__init__(f"{option}: {problem}" if option else problem)
        self.option = option


class ModelProvider(Protocol):
    name: str

    @property
    def default_model(self) -> str:
        """The model of a run whose profile and input name none."""
        ...

    def plan(self, settings: ModelSettings, options: dict[str, Any], context: PlanContext) -> ModelSettings:
        """The run's settings with this provider's `options` (the run's `model.options`) checked and
        resolved into `settings.options`, once per run; raise `ProviderOptionsError` naming the option."""
        ...

    def unavailable(self, settings: ModelSettings) -> str | None:
        """Why this worker cannot serve runs with these settings (say, no API key: name the variable),
        or None. Asked when a run is planned, so a run that could never call its model fails at once."""
        ...

    async def complete(self, call: ModelCall) -> Completion:
        """One model turn. Raise `ApplicationError`s classified retryable or not."""
        ...


Options = TypeVar("Options", bound=BaseModel)


def check_options(model: type[Options], options: dict[str, Any]) -> Options:
    """A provider's options validated by its pydantic model; a problem is a `ProviderOptionsError`
    naming the option (`script_file: Field required`)."""
    try:
        return model.model_validate(options)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ProviderOptionsError(".".join(str(p) for p in first["loc"]) or None, first["msg"]) from None


@dataclass
class ProviderRegistry:
    providers: dict[str, ModelProvider] = field(default_factory=dict)

    def register(self, provider: ModelProvider) -> ModelProvider:
        self.providers[provider.name] = provider
        return provider

    def get(self, name: str) -> ModelProvider | None:
        return self.providers.get(name)

    def secrets(self) -> list[str]:
        """The secret values of the providers' settings (a provider whose `settings` is a
        `ProviderSettings`), for the worker's redaction: also those given in code, not read from
        the environment."""
        found = []
        for provider in self.providers.values():
            settings = getattr(provider, "settings", None)
            if isinstance(settings, BaseModel):
                values = [*dict(settings).values(), *getattr(settings, "headers", {}).values()]
                found += [v.get_secret_value() for v in values if isinstance(v, SecretStr)]
        return [v for v in found if v]
