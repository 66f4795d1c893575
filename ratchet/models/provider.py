"""The model-provider seam: what `model.call` needs from any model backend.

A provider is registered on the worker by name (`openai` and `scripted` ship); a run's
`ModelSettings.provider` names one, checked when the run is planned. A third provider (another
vendor's SDK, a local runtime) is a class with `name`, `unavailable` and `complete`, registered
through the plugin's options: no contract changes.

Providers do not retry: Temporal's retry policy does, so a provider raises `ApplicationError`s
classified on purpose (retryable for transient failures, `non_retryable=True` for ones that will
recur), as ratchet/models/openai_errors.py does for the openai client.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from ratchet.contracts import Message, ModelSettings, Usage


@dataclass(frozen=True)
class ModelCall:
    """One model turn, as the model activity hands it to a provider."""

    key: str
    """The call's idempotency key (`{workflow id}/{step}/model`), stable across retries; providers
    whose endpoint deduplicates send it along (the openai provider as `Idempotency-Key`)."""
    settings: ModelSettings
    tools: list[dict[str, Any]]
    """Tool schemas in the OpenAI function-calling format, in the author's property order."""
    messages: list[Message]
    """What the model is sent: the context window of the conversation, long contents inlined."""
    turn: int
    """Assistant messages in the whole conversation before this call."""
    step: int
    deltas: Deltas | None = None
    """Where the reply goes while the model writes it (None: the run does not stream it). A
    provider that streams hands it each piece; the `Completion` it returns is the whole reply,
    exactly what it returns without `deltas`."""


class Deltas(Protocol):
    """A reply as it is written (activities/streaming.py publishes it to the run's stream)."""

    def text(self, text: str) -> None:
        """The next piece of the reply's text."""
        ...

    def tool_call(self, index: int, name: str = "", arguments: str = "") -> None:
        """The next piece of tool call `index` (its position in the reply): its name once known,
        the next characters of its JSON arguments."""
        ...


@dataclass(frozen=True)
class Completion:
    message: Message
    usage: Usage
    finish_reason: str | None = None
    model: str = ""
    """The model the provider says answered ("" when it names none)."""


class ModelProvider(Protocol):
    name: str

    def unavailable(self, settings: ModelSettings) -> str | None:
        """Why this worker cannot serve runs with these settings (say, no API key), or None.
        Asked when a run is planned, so a run that could never call its model fails at once."""
        ...

    async def complete(self, call: ModelCall) -> Completion:
        """One model turn. Raise `ApplicationError`s classified retryable or not."""
        ...


@dataclass
class ProviderRegistry:
    providers: dict[str, ModelProvider] = field(default_factory=dict)

    def register(self, provider: ModelProvider) -> ModelProvider:
        self.providers[provider.name] = provider
        return provider

    def get(self, name: str) -> ModelProvider | None:
        return self.providers.get(name)
