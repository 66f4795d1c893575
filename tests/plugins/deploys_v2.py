"""Loaded by the workers of `v2` only (RATCHET_PLUGINS; tests/deploys/test_deploys_versions.py, `make
chaos`'s deploys line): the working tree's release changes the prompt of the profiles those runs
use, so `v2` is a new build (its default build id digests the profiles) even where its code equals
`v1`'s, and a run started on `v2` shows it in its system prompt (devtools/versions.py)."""

from __future__ import annotations

import tests.plugins.chaos_tools  # noqa: F401  (chaos_quick)
import tests.plugins.probe  # noqa: F401  (chatter)
from devtools.versions import V2_PROMPT
from ratchet.core.profiles import default_profiles

for name in ("chatter", "chaos_quick"):
    profile = default_profiles.profiles[name]
    default_profiles.profiles[name] = profile.model_copy(update={"system_prompt": profile.system_prompt + V2_PROMPT})
