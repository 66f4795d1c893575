"""Ratchet: a durable runtime for LLM agents on Temporal.

The layers, from the bottom up (an import only points down or sideways within a layer):

- `ratchet.contracts`: the data that crosses Temporal boundaries (pydantic and stdlib only);
- `ratchet.core`: the agent's vocabulary: tools, profiles, idempotency keys, budget arithmetic;
- `ratchet.workflows`: the agent's state machine (deterministic, no I/O);
- `ratchet.stores` and `ratchet.models`: the backends behind protocols (ledger, artifacts,
  transcripts; model providers);
- `ratchet.activities`: every piece of I/O an agent does, built on stores and models;
- `ratchet.payloads` and `ratchet.ops`: the data converter and codecs; settings, logs, metrics,
  tracing, secret redaction;
- `ratchet.people`: who a request to the console or `ratchet serve` comes from (OpenID Connect, a
  trusted proxy's header, a person's API token from the users table, the single-user token);
- `ratchet.plugin` and `ratchet.worker`: the one wiring point (a Temporal plugin) and the worker
  process; `ratchet.client`: the API every surface uses (`RatchetClient`, `RunHandle`; over
  payloads, stores, ops and contracts, nothing of the worker side); `ratchet.cli` and
  `ratchet.replay`: the `ratchet` command and the deploy gate;
- `ratchet.testing`: test doubles a user's own tests may use (an OpenAI-compatible server).

docs/ARCHITECTURE.md has the picture and a "where to find X" table.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "tool": "ratchet.core.tools",
    "ToolContext": "ratchet.core.tools",
    "ToolError": "ratchet.core.tools",
    "FatalToolError": "ratchet.core.tools",
    "NotStarted": "ratchet.core.tools",
    "undo_for": "ratchet.core.tools",
    "reconcile_for": "ratchet.core.tools",
    "undo_record": "ratchet.core.tools",
    "AgentProfile": "ratchet.core.profiles",
    "register_profile": "ratchet.core.profiles",
    "register_output_type": "ratchet.core.outputs",
    "RatchetPlugin": "ratchet.plugin",
    "RatchetOptions": "ratchet.plugin",
    "AgentRun": "ratchet.contracts",
    "ModelChoice": "ratchet.contracts",
    "AgentResult": "ratchet.contracts",
    "AgentState": "ratchet.contracts",
    "RatchetClient": "ratchet.client",
    "RunHandle": "ratchet.client",
}
"""What a user writes against, by the module that defines it. Loaded on first use, so importing
`ratchet` (as every workflow module does, also in the SDK's sandbox) imports none of them."""

__all__ = [
    "AgentProfile",
    "AgentResult",
    "AgentRun",
    "AgentState",
    "FatalToolError",
    "ModelChoice",
    "NotStarted",
    "RatchetClient",
    "RatchetOptions",
    "RatchetPlugin",
    "RunHandle",
    "ToolContext",
    "ToolError",
    "reconcile_for",
    "register_profile",
    "register_output_type",
    "tool",
    "undo_for",
    "undo_record",
]
assert sorted(__all__) == sorted(_EXPORTS)

if TYPE_CHECKING:
    from ratchet.client import RatchetClient, RunHandle
    from ratchet.contracts import AgentResult, AgentRun, AgentState, ModelChoice
    from ratchet.core.outputs import register_output_type
    from ratchet.core.profiles import AgentProfile, register_profile
    from ratchet.core.tools import (
        FatalToolError,
        NotStarted,
        ToolContext,
        ToolError,
        reconcile_for,
        tool,
        undo_for,
        undo_record,
    )
    from ratchet.plugin import RatchetOptions, RatchetPlugin


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'ratchet' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
