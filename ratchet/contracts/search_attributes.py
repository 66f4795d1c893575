"""The search attributes a run publishes, each name and type declared once: workflows/visibility.py
upserts them, ratchet/ops/search_attributes.py registers them on a namespace, and queries name them
(`temporal workflow list --query 'RatchetPhase="AWAITING_APPROVAL"'`)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class AttributeType(StrEnum):
    """A search attribute's type, as `temporal operator search-attribute create --type` spells it."""

    KEYWORD = "Keyword"
    BOOL = "Bool"
    INT = "Int"
    DOUBLE = "Double"


@dataclass(frozen=True)
class SearchAttribute:
    name: str
    type: AttributeType

    def __str__(self) -> str:
        return self.name  # as a query names it: f'{RunAttributes.PHASE}="DONE"'


WORKING = "RUNNING"
"""`RatchetPhase` of a run at work (starting, thinking, acting...): what a start through ratchet.client
sets, and what workflows/visibility.py shows for every phase it does not show as it is."""


class RunAttributes:
    """Every search attribute a run publishes."""

    AGENT = SearchAttribute("RatchetAgent", AttributeType.KEYWORD)
    """The run's agent (profile)."""
    PHASE = SearchAttribute("RatchetPhase", AttributeType.KEYWORD)
    """The phase, the working ones shown as RUNNING (workflows/visibility.py)."""
    AWAITING_APPROVAL = SearchAttribute("RatchetAwaitingApproval", AttributeType.BOOL)
    """A call waits for a person's approval."""
    SESSION = SearchAttribute("RatchetSession", AttributeType.BOOL)
    """Set (true) on sessions only."""
    TURN = SearchAttribute("RatchetTurn", AttributeType.INT)
    """A session's latest turn."""
    STEPS = SearchAttribute("RatchetSteps", AttributeType.INT)
    """Steps taken when the run last came to wait or closed."""
    COST = SearchAttribute("RatchetCostUsd", AttributeType.DOUBLE)
    """What it had spent then (USD)."""

    BUILD = SearchAttribute("RatchetBuildId", AttributeType.KEYWORD)
    """The build of its worker deployment the run is on (ended on), with versioning on."""

    SHADOW_OF = SearchAttribute("RatchetShadowOf", AttributeType.KEYWORD)
    """Set on shadow runs only: the workflow id of the run it shadows (`ratchet shadow`)."""

    TENANT = SearchAttribute("RatchetTenant", AttributeType.KEYWORD)
    """Set on runs that name a tenant (`AgentRun.tenant`), from the start: the per-tenant limit on
    open runs counts them (`temporal workflow list --query 'RatchetTenant="acme"'`)."""
    PRIORITY = SearchAttribute("RatchetPriority", AttributeType.KEYWORD)
    """Set on runs that name a priority, from the start: "1" (most urgent) to "5". A keyword, as the
    dev server's SQLite visibility has only three Int attributes (RatchetTurn, RatchetSteps hold two)."""
    HANDED_TO = SearchAttribute("RatchetHandedTo", AttributeType.KEYWORD)
    """The person's or role's inbox (`person:alice`, `role:reviewers`) a run is handed to, while it
    waits for their answer (unset once they gave it): `ratchet inbox --person alice`."""

    ALL: tuple[SearchAttribute, ...] = (
        AGENT,
        PHASE,
        AWAITING_APPROVAL,
        SESSION,
        TURN,
        STEPS,
        COST,
        BUILD,
        SHADOW_OF,
        TENANT,
        PRIORITY,
        HANDED_TO,
    )
