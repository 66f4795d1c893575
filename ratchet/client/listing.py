"""Listing runs: Temporal's visibility store, filtered by Ratchet's search attributes (`RatchetClient.list`,
`list_page`), and a run as visibility describes it (`RunHandle.summary`)."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from datetime import datetime

from pydantic import BaseModel
from temporalio.client import Client, WorkflowExecution
from temporalio.service import RPCError, RPCStatusCode

from ratchet.client.errors import InvalidInput, rpc_error
from ratchet.contracts import AGENT_WORKFLOW
from ratchet.contracts.search_attributes import RunAttributes


class RunSummary(BaseModel):
    """A run as Temporal's visibility lists it, with Ratchet's search attributes."""

    workflow_id: str
    status: str
    agent: str | None = None
    phase: str | None = None
    awaiting_approval: bool = False
    start_time: datetime | None = None
    session: bool = False
    turn: int | None = None
    """A session's latest turn (RatchetTurn)."""
    steps: int | None = None
    """Steps taken when the run last came to wait or closed (RatchetSteps; while `phase` is RUNNING
    it is older than that: ask the run's state)."""
    cost_usd: float | None = None
    """What it had spent then (RatchetCostUsd)."""
    build: str | None = None
    """The build of its worker deployment it is on, or ended on (RatchetBuildId; None: unversioned)."""
    tenant: str | None = None
    """Who the run is for (RatchetTenant), if it names a tenant."""
    priority: int | None = None
    """Its priority, 1 (most urgent) to 5, if it names one (RatchetPriority)."""
    handed_to: str | None = None
    """The person's or role's inbox it waits in (`person:alice`; RatchetHandedTo), while it does."""


class RunPage(BaseModel):
    """One page of `RatchetClient.list_page`: the runs, and the token of the next page (None: the last)."""

    runs: list[RunSummary]
    next_page: str | None = None


@dataclass(frozen=True)
class RunFilter:
    """What a listing keeps: `query` adds a raw visibility clause, `session` keeps only sessions
    (True) or only runs that are not (False)."""

    agent: str | None = None
    phase: str | None = None
    awaiting_approval: bool | None = None
    running: bool | None = None
    query: str | None = None
    session: bool | None = None
    tenant: str | None = None


async def list_runs(temporal: Client, which: RunFilter, limit: int) -> list[RunSummary]:
    """Runs, newest first, at most `limit`."""
    found = []
    try:
        async for run in temporal.list_workflows(visibility(which), limit=limit):
            found.append(summary(run))
    except RPCError as exc:
        raise rpc_error("cannot list runs", exc, temporal.service_client.config.target_host) from None
    return found


async def list_page(temporal: Client, which: RunFilter, page_size: int, page: str | None) -> RunPage:
    """One page of runs, newest first: `page` is the `next_page` of the page before (None: the
    first). One visibility request per page, however many runs there are."""
    try:
        token = base64.urlsafe_b64decode(page.encode()) if page else None
    except ValueError:
        raise InvalidInput("runs page", [f"page: not a page token: {page!r}"]) from None
    listing = temporal.list_workflows(visibility(which), page_size=page_size, next_page_token=token)
    try:
        await listing.fetch_next_page(page_size=page_size)
    except RPCError as exc:
        if exc.status == RPCStatusCode.INVALID_ARGUMENT:
            raise InvalidInput("runs page", [f"page: {exc.message}"]) from None
        raise rpc_error("cannot list runs", exc, temporal.service_client.config.target_host) from None
    following = listing.next_page_token
    return RunPage(
        runs=[summary(run) for run in listing.current_page or []],
        next_page=base64.urlsafe_b64encode(following).decode() if following else None,
    )


def visibility(which: RunFilter) -> str:
    """The visibility query of a listing: Ratchet's runs, with its search attributes as filters."""
    clauses = [f'WorkflowType="{AGENT_WORKFLOW}"']
    named = (
        (RunAttributes.PHASE, which.phase),
        (RunAttributes.AGENT, which.agent),
        (RunAttributes.TENANT, which.tenant),
    )
    for name, value in named:
        if value:
            if '"' in value or "\\" in value:
                raise InvalidInput("runs filter", [f"{name}: no quotes or backslashes, not {value!r}"])
            clauses.append(f'{name}="{value}"')
    if which.awaiting_approval is not None:
        clauses.append(f"{RunAttributes.AWAITING_APPROVAL}={'true' if which.awaiting_approval else 'false'}")
    if which.running:
        clauses.append('ExecutionStatus="Running"')
    if which.session is not None:  # only sessions carry the session attribute
        session = RunAttributes.SESSION
        clauses.append(f"{session}=true" if which.session else f"{session} IS NULL")
    if which.query:
        clauses.append(f"({which.query})")
    return " AND ".join(clauses)


def summary(run: WorkflowExecution) -> RunSummary:
    """A run as visibility (or `describe`) has it: its search attributes, readable without the codec keys."""
    attributes = run.search_attributes
    return RunSummary(
        workflow_id=run.id,
        status=run.status.name if run.status else "-",
        agent=(attributes.get(RunAttributes.AGENT.name) or [None])[0],
        phase=(attributes.get(RunAttributes.PHASE.name) or [None])[0],
        awaiting_approval=bool((attributes.get(RunAttributes.AWAITING_APPROVAL.name) or [False])[0]),
        start_time=run.start_time,
        session=bool((attributes.get(RunAttributes.SESSION.name) or [False])[0]),
        turn=(attributes.get(RunAttributes.TURN.name) or [None])[0],
        steps=(attributes.get(RunAttributes.STEPS.name) or [None])[0],
        cost_usd=(attributes.get(RunAttributes.COST.name) or [None])[0],
        build=(attributes.get(RunAttributes.BUILD.name) or [None])[0],
        tenant=(attributes.get(RunAttributes.TENANT.name) or [None])[0],
        priority=int(str((attributes.get(RunAttributes.PRIORITY.name) or [0])[0])) or None,
        handed_to=(attributes.get(RunAttributes.HANDED_TO.name) or [None])[0],
    )
