"""The records an agent's state is made of: tool calls, effects, checkpoints, rollbacks,
failovers, approvals and decisions, the budget spent (`ratchet.contracts.state` puts them together)."""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, Field

from ratchet.contracts.base import ArtifactRef, EffectClass
from ratchet.contracts.decisions import DecisionProof
from ratchet.contracts.payloads import Evidence, Message, ToolResult, WorkspaceBinding
from ratchet.contracts.shadow import ShadowMark


class ToolCallRecord(BaseModel):
    step: int
    call_id: str
    tool: str
    key: str
    arguments: str
    result: ToolResult
    shadow: ShadowMark | None = None
    """In a shadow run, a call it did not run: answered with the original's result (`recorded`) or
    not executed (`quarantined`: a would-have-called). None: the call ran."""


class EffectStatus(StrEnum):
    PENDING = "pending"
    """Registered; the call is scheduled or its outcome is unknown."""
    DONE = "done"
    FAILED = "failed"
    """The call failed; it may still have taken effect, so its undo runs too."""
    UNDONE = "undone"
    UNDO_FAILED = "undo_failed"
    NOT_UNDONE = "not_undone"
    """Left in place: irreversible, or an older effect behind an undo that failed."""


UNDO_DESCRIPTION = "description"
"""The key of an undo record (`Effect.undo`, what `ToolContext.record_undo` and `ToolOutput.undo`
carry) that tells a person what the undo will do ("restore a.txt (181 bytes)", "delete ticket #12"),
written by the tool that records the undo (`ratchet.core.tools.undo_record`)."""


class Effect(BaseModel):
    tool: str
    step: int
    call_id: str
    key: str
    arguments: dict[str, Any]
    effect: EffectClass
    turn: int = 0
    """The session turn it was done in (0: not a session)."""
    workspace: bool = False
    """Done by a workspace tool (on the host holding the workspace; a failover restores it)."""
    status: EffectStatus = EffectStatus.PENDING
    undo: dict[str, Any] | None = None
    error: str | None = None

    @property
    def undo_description(self) -> str | None:
        """What undoing this effect will do, in the tool's words (None: the tool recorded none, or
        the call never reported; its undo then reads the ledger)."""
        value = (self.undo or {}).get(UNDO_DESCRIPTION)
        return value if isinstance(value, str) else None


class Checkpoint(BaseModel):
    id: str
    step: int
    created_at: str
    effects_len: int
    messages_len: int
    turn: int = 0
    """The session turn it was taken in (0: not a session); `turn-N` is the end of turn N."""
    messages: list[Message] | None = None
    """Filled only in a copy taken for a fork (messages `messages_base`..`messages_len`); a live
    run's checkpoint is a prefix of its messages."""
    messages_base: int = 0
    transcript: str | None = None
    unsent: int
    summary: str
    evidence: Evidence | None = None
    verified: bool | None = None
    """True: the step's verifier passed; False: it ran no test (`Evidence.no_tests`), so the step
    is kept unverified; None: no verifier ran (a session turn's end)."""
    patch_ref: ArtifactRef | None = None
    workspace_ref: ArtifactRef | None = None


class Forked(BaseModel):
    """What `checkpoint.fork` returns: the checkpoint, and where its files were restored."""

    checkpoint: Checkpoint
    binding: WorkspaceBinding


class RollbackReport(BaseModel):
    checkpoint_id: str | None
    reason: str = ""
    undone: list[str] = Field(default_factory=list)
    irreversible: list[str] = Field(default_factory=list)
    """Effects that cannot be undone and were left in place."""
    not_undone: list[str] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)
    turns_removed: list[int] = Field(default_factory=list)
    """A session's turns the rollback took out of the conversation (newer than the checkpoint's)."""

    @property
    def clean(self) -> bool:
        return not self.not_undone and not self.errors


class Failover(BaseModel):
    """The host holding a run's workspace was lost; the run went on from its last checkpoint on another."""

    step: int
    at: str
    from_host: str | None
    """Task queue of the lost host."""
    to_host: str
    checkpoint_id: str | None
    """The checkpoint restored; None: the workspace as it was when the run started."""
    reason: str
    restored: list[str] = Field(default_factory=list)
    """Workspace effects after the checkpoint, reverted by restoring its files."""
    undone: list[str] = Field(default_factory=list)
    """Other effects after the checkpoint, undone by their undo activities."""
    irreversible: list[str] = Field(default_factory=list)
    """Effects after the checkpoint that cannot be undone, left in place."""


class RollbackPlanItem(BaseModel):
    tool: str
    step: int
    key: str
    action: Literal["undo", "irreversible", "already_undone", "archived"]
    """`archived`: one item standing for the effects kept in the artifact store (`key`: the
    archive's digest); a rollback loads them and undoes each (`ratchet rollback --dry-run` lists them)."""
    turn: int = 0
    """The session turn the effect was done in (0: not a session)."""
    description: str | None = None
    """What the undo does, for the person deciding ("restore a.txt (181 bytes)", "delete ticket #12"):
    the tool's own words from the undo record (`Effect.undo_description`), a count for a sub-agent."""


class PendingApproval(BaseModel):
    call_id: str
    tool: str
    step: int
    arguments: dict[str, Any]
    requested_at: str
    reason: str
    digest: str = ""
    """The call's digest (tool, schema, arguments): a signed decision must name it."""


class Decision(BaseModel):
    approved: bool
    reason: str = ""
    by: str = "person"
    at: str = ""
    """When it was decided (the workflow's time, ISO 8601)."""
    digest: str = ""
    """The digest of the call decided on (`PendingApproval.digest`)."""
    subject: str | None = None
    """Who signed it, as `issuer` names them, in `role` (None: an unsigned decision)."""
    issuer: str | None = None
    role: str | None = None
    proof: DecisionProof | None = None
    """The proof the request carried, checked when it was accepted."""


class Transcript(BaseModel):
    """Consecutive messages of a run's conversation, the first at index `offset`, of `total`: the
    `transcript` query's answer, and `RunHandle.transcript`'s (earlier messages read back too)."""

    total: int
    offset: int
    messages: list[Message]


class BudgetUsed(BaseModel):
    steps: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cache_read_tokens: int = 0
    """Of `prompt_tokens`, read from the provider's prompt cache."""
    cache_write_tokens: int = 0
    """Of `prompt_tokens`, written to the provider's prompt cache."""
    cost_usd: float = 0.0
    """Billed, every attempt included (failed ones, retries, fallbacks: activities/billing.py)."""
    cost_unknown: bool = False
    """Some model called has no price (ratchet/core/prices.py): `cost_usd` counts its calls as $0."""
    model_calls: int = 0
    tool_calls: int = 0
