"""Loaded by the workers of a broken `v2` only (RATCHET_PLUGINS; tests/deploys/test_deploys_versions.py):
the release breaks `probe_echo` (every call fails its run), so a run that uses it fails on v2 and
not on v1, and v2 is a new build (its default build id digests each tool's source file)."""

from __future__ import annotations

import dataclasses

from devtools.versions import V2_BROKEN
from ratchet.core.tools import FatalToolError, ToolContext, default_registry
from tests.plugins.probe import EchoArgs


def broken_echo(ctx: ToolContext, args: EchoArgs) -> str:
    raise FatalToolError(V2_BROKEN)


default_registry.tools["probe_echo"] = dataclasses.replace(default_registry.tools["probe_echo"], fn=broken_echo)
