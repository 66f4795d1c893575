"""The providers a worker has unless its plugin options say otherwise: `openai` and `scripted`."""

from __future__ import annotations

from ratchet.models.openai import OpenAIProvider
from ratchet.models.provider import ProviderRegistry
from ratchet.models.scripted import ScriptedProvider
from ratchet.ops.settings import Settings
from ratchet.stores.artifacts import ArtifactStore


def builtin_providers(settings: Settings, artifacts: ArtifactStore) -> ProviderRegistry:
    registry = ProviderRegistry()
    registry.register(OpenAIProvider(settings))
    registry.register(ScriptedProvider(artifacts, settings.scripted_chars_per_s))
    return registry
