"""A shadow run: a recorded run started again with a candidate change, its side effects quarantined.

`AgentRun.shadow` (a `ShadowOf`) makes a run a shadow. It runs on the same workers and task queue as
production: the quarantine is decided in the workflow from this input (workflows/quarantine.py), so
every worker enforces it and no routing can let a shadow's call reach the world. Which tool runs for
real is one pure rule, `runs_in_shadow`, shared by the workflow and the client (which records in the
input only the original's calls the shadow may need answered).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from ratchet.contracts.base import ArtifactRef, EffectClass, Strict

if TYPE_CHECKING:  # plan imports run, which imports this module
    from ratchet.contracts.plan import ToolSpec

QUARANTINED = "not executed in a shadow run: its effect would leave the shadow's private workspace"
"""What a quarantined call answers when the original made no call with the same tool and arguments."""

ShadowMark = Literal["recorded", "quarantined"]
"""How a shadow answered a call it did not run: with the original's recorded result, or with the
quarantine result (the call is kept, arguments and all, as a would-have-called)."""


class ProfileChange(Strict):
    """Profile fields a shadow's candidate may set (`ratchet shadow --set field=value|@file`)."""

    system_prompt: str | None = Field(default=None, min_length=1, max_length=1_000_000)
    tools: list[str] | None = Field(default=None, max_length=1000)
    temperature: float | None = Field(default=None, ge=0, le=2)
    context_messages: int | None = Field(default=None, ge=2, le=1_000_000)
    max_bad_tool_calls: int | None = Field(default=None, ge=0, le=10_000)


class RecordedCall(Strict):
    """A call of the original run that a shadow does not make itself: its result, by tool and
    canonical arguments (`canonical`)."""

    tool: str
    arguments: str
    """`canonical(arguments)`: sorted keys, no spaces."""
    ok: bool
    output: str
    output_ref: ArtifactRef | None = None
    error_type: str | None = None


class ShadowOf(Strict):
    """The original a shadow is of, and what it needs of it."""

    workflow_id: str = Field(min_length=1, max_length=1000)
    """The original run (its workflow id); the shadow's search attribute `RatchetShadowOf` holds it."""
    workspace_ref: ArtifactRef | None = None
    """The manifest of the original's workspace when it started: restored into the shadow's private
    workspace (a shadow from a checkpoint gets the checkpoint's through `resume_from` instead)."""
    recorded: list[RecordedCall] = Field(default_factory=list, max_length=100_000)
    """The original's calls of tools that do not run in a shadow, with their results."""
    profile: ProfileChange | None = None
    """The candidate's changes to the profile, applied when the shadow is planned."""


def runs_in_shadow(spec: ToolSpec) -> bool:
    """Read-only tools, and compensable tools of the (private) workspace, run for real; irreversible,
    external and child (`delegate`) calls never do, nor timers (`wait`): a shadow does not sit out
    the original's waits, and the recorded result ("waited 3600s; it is now ...") keeps its prompt
    the original's."""
    if spec.kind != "activity":
        return False
    return spec.effect == EffectClass.READ_ONLY or (spec.workspace and spec.effect == EffectClass.COMPENSABLE)


def canonical(arguments: dict[str, Any] | str) -> str:
    """Arguments as a call is matched by: JSON with sorted keys and no spaces (a string that is not
    a JSON object is kept as it is)."""
    value: Any = arguments
    if isinstance(arguments, str):
        try:
            value = json.loads(arguments or "{}")
        except ValueError:
            return arguments
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def recorded_call(recorded: list[RecordedCall], tool: str, arguments: dict[str, Any]) -> RecordedCall | None:
    """The original's first call of `tool` with these arguments, or None."""
    key = canonical(arguments)
    return next((r for r in recorded if r.tool == tool and r.arguments == key), None)


SHADOW_CLEAN_WORKFLOW = "RatchetShadowClean"
"""The workflow `ratchet shadow clean` starts (workflows/shadow_clean.py): what a shadow left on the
worker side (its private workspace on each host that held it, its ledger entries) deleted there."""


class ShadowLeftovers(Strict):
    """What one shadow left outside its execution, as its state tells."""

    workflow_id: str = Field(min_length=1, max_length=1000)
    workspace: str | None = None
    """Its private workspace's directory (None: it had no workspace tools, or was never planned)."""
    hosts: list[str] = Field(default_factory=list)
    """The host queues that held that directory: the last binding's, and each failover's from-host."""


class CleanShadows(Strict):
    """The input of `RatchetShadowClean`."""

    shadows: list[ShadowLeftovers] = Field(min_length=1)
    host_timeout_s: float = Field(30.0, gt=0, le=3600)
    """How long a host has to take its `workspace.remove` before it counts as gone."""


class RemoveWorkspace(Strict):
    """Input of `workspace.remove`: a shadow's private workspace, deleted on the host holding it."""

    workspace: str = Field(min_length=1)


class ForgetRun(Strict):
    """Input of `ledger.forget`: every ledger entry of a run gone for good (`Ledger.forget`)."""

    workflow_id: str = Field(min_length=1)


class ShadowCleaned(Strict):
    """What `ratchet shadow clean` deleted of one shadow besides its execution."""

    workflow_id: str
    ledger_entries: int = 0
    removed_on: list[str] = Field(default_factory=list)
    """The hosts whose copy of its private workspace was deleted."""
    lost: list[str] = Field(default_factory=list)
    """Hosts that did not take the deletion in time (gone): their copy, if any, is left."""
