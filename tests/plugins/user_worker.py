"""A user's worker module, laid out as people write one: their sandboxed workflow beside the
imports of Ratchet's wiring (tests/ops/test_plugin.py runs it)."""

from __future__ import annotations

from temporalio import workflow

import ratchet.plugin  # noqa: F401
from ratchet import RatchetOptions, RatchetPlugin  # noqa: F401  (the worker module's own imports)


@workflow.defn
class UserGreeting:
    """Sandboxed (the SDK's default): the sandbox re-imports this module, and with it ratchet."""

    @workflow.run
    async def run(self, name: str) -> str:
        return f"hello, {name}"
