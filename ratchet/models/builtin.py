"""The providers a worker has unless its plugin options say otherwise: `openai`, `anthropic`,
`scripted` and `recorded` (a shadow run's replay of its original's replies), each reading its own
settings from the environment (`ratchet.models.settings`). The anthropic provider is there without
its SDK too: its runs then fail at once saying what to install."""

from __future__ import annotations

from ratchet.models.anthropic import AnthropicProvider, AnthropicSettings
from ratchet.models.openai import OpenAIProvider, OpenAISettings
from ratchet.models.provider import ProviderRegistry
from ratchet.models.recorded import RecordedProvider
from ratchet.models.scripted import ScriptedProvider
from ratchet.models.settings import ProviderSettings, load
from ratchet.stores.artifacts import ArtifactStore


def builtin_providers(artifacts: ArtifactStore) -> ProviderRegistry:
    """Raises SettingsError naming the variable when a provider's settings are bad."""
    registry = ProviderRegistry()
    registry.register(OpenAIProvider())
    registry.register(AnthropicProvider())
    registry.register(ScriptedProvider(artifacts))
    registry.register(RecordedProvider(artifacts, registry))
    return registry


def provider_settings() -> dict[str, ProviderSettings]:
    """Each built-in provider's settings as this environment gives them (`ratchet config`)."""
    return {"openai": load(OpenAISettings), "anthropic": load(AnthropicSettings)}
