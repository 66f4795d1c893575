"""A person's inbox: the runs handed to a person or a role (`handoff` to `person:NAME` or
`role:NAME`, ratchet/contracts/handoff.py), found through the `RatchetHandedTo` search attribute,
each with its handoff record read from the run's state (`RatchetClient.inbox`, `ratchet inbox`,
the console's inbox page). A person answers one with `RunHandle.respond`."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable

from pydantic import BaseModel

from ratchet.client import listing
from ratchet.client.errors import InvalidInput, RatchetError
from ratchet.client.listing import RunFilter
from ratchet.contracts import AgentState
from ratchet.contracts.handoff import INBOX_PATTERN, Handoff
from ratchet.contracts.search_attributes import RunAttributes
from temporalio.client import Client


class InboxItem(BaseModel):
    """A run waiting in a person's (or role's) inbox, with the handoff record it waits on."""

    workflow_id: str
    agent: str
    """The profile that handed it over."""
    handoff: Handoff


def inbox_query(person: str | None, role: str | None) -> str:
    """The visibility clause of an inbox: one person's, one role's, or every run handed to people."""
    if person and role:
        raise InvalidInput("inbox", ["person, role: name one of them, not both"])
    if not person and not role:
        return f"{RunAttributes.HANDED_TO} IS NOT NULL"
    target = f"person:{person}" if person else f"role:{role}"
    if re.match(INBOX_PATTERN, target) is None:
        field = "person" if person else "role"
        raise InvalidInput("inbox", [f"{field}: letters, digits and _.@- only, not {(person or role)!r}"])
    return f'{RunAttributes.HANDED_TO}="{target}"'


async def inbox(
    temporal: Client,
    state_of: Callable[[str], Awaitable[AgentState]],
    person: str | None,
    role: str | None,
    limit: int,
) -> list[InboxItem]:
    """The running runs handed to `person` (or `role`; neither: anyone), newest first. A run that
    went on between the listing and its state query (answered meanwhile) is left out."""
    which = RunFilter(running=True, query=inbox_query(person, role))
    items = []
    for run in await listing.list_runs(temporal, which, limit):
        try:
            state = await state_of(run.workflow_id)
        except RatchetError:
            continue  # closed or unreachable meanwhile: no longer in anyone's inbox
        waiting = state.handoffs[-1] if state.handoffs and state.handoffs[-1].waiting else None
        if waiting is not None:
            items.append(InboxItem(workflow_id=run.workflow_id, agent=state.run.agent, handoff=waiting))
    return items
