"""Starting a run: its input validated first (InvalidInput names the field), its id checked against
the runs that have it (IdInUse), its summary for the Temporal Web UI (`RatchetClient.start`)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError
from temporalio.client import Client, WorkflowHandle
from temporalio.common import (
    SearchAttributePair,
    TypedSearchAttributes,
    WorkflowIDReusePolicy,
)
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from ratchet.client.errors import IdInUse, InvalidInput, rpc_error
from ratchet.client.rpc import RunCalls
from ratchet.client.tenants import admit, tenant_attributes, workflow_priority
from ratchet.contracts import AGENT_WORKFLOW, AgentResult, AgentRun
from ratchet.contracts.search_attributes import WORKING, RunAttributes
from ratchet.core.search_keys import key
from ratchet.ops.settings import Settings


async def start_run(
    temporal: Client,
    settings: Settings,
    run: AgentRun | Mapping[str, Any] | str,
    workflow_id: str | None,
    new_run: bool,
) -> WorkflowHandle[Any, AgentResult]:
    """The started run's handle (see `RatchetClient.start`): on `settings.task_queue`, with its
    tenant's priority, once its tenant is under its limit of open runs (ratchet/client/tenants.py)."""
    checked = validated_run(run)
    await admit(temporal, settings, checked)
    workflow_id = workflow_id or f"{checked.agent}-{uuid.uuid4().hex[:8]}"
    reuse = WorkflowIDReusePolicy.ALLOW_DUPLICATE if new_run else WorkflowIDReusePolicy.REJECT_DUPLICATE
    try:
        try:
            return await _start(temporal, settings, checked, workflow_id, reuse, shown=settings.search_attributes)
        except RPCError as exc:
            if not (settings.search_attributes and _unknown_attribute(exc)):
                raise
            # the namespace does not know them (yet: a worker registering them now, the server's cache
            # of them): the run shows them from its first upsert instead
            return await _start(temporal, settings, checked, workflow_id, reuse, shown=False)
    except WorkflowAlreadyStartedError:
        existing = temporal.get_workflow_handle(workflow_id, result_type=AgentResult)
        description = await RunCalls(temporal, workflow_id, existing).describe()
        phase = (description.search_attributes.get(RunAttributes.PHASE.name) or [None])[0]
        status = description.status.name if description.status else "CLOSED"
        raise IdInUse(workflow_id, str(phase) if phase is not None else None, status) from None
    except RPCError as exc:
        if _unknown_attribute(exc):  # a tenant's or a priority's, which the limit needs at the start
            raise InvalidInput("start", [f"{exc.message}: {MISSING_ATTRIBUTES}"]) from None
        raise rpc_error(f"cannot start {workflow_id}", exc, temporal.service_client.config.target_host) from None


async def _start(
    temporal: Client,
    settings: Settings,
    run: AgentRun,
    workflow_id: str,
    reuse: WorkflowIDReusePolicy,
    shown: bool,
) -> WorkflowHandle[Any, AgentResult]:
    return await temporal.start_workflow(
        AGENT_WORKFLOW,
        run.model_dump(exclude_none=True, mode="json"),
        id=workflow_id,
        task_queue=settings.task_queue,
        result_type=AgentResult,
        static_summary=start_summary(run),
        id_reuse_policy=reuse,
        priority=workflow_priority(run, settings),
        search_attributes=start_attributes(run, shown),
    )


def _unknown_attribute(exc: RPCError) -> bool:
    """The service refused the start: its namespace has no such search attribute."""
    return exc.status == RPCStatusCode.INVALID_ARGUMENT and "search attribute" in exc.message


MISSING_ATTRIBUTES = (
    "the namespace lacks Ratchet's search attributes; start a worker once (it registers them), or "
    'register them (docs/OPERATIONS.md, "Search attributes"), or set RATCHET_SEARCH_ATTRIBUTES=false '
    "on the workers and the clients"
)


def start_attributes(run: AgentRun, shown: bool) -> TypedSearchAttributes:
    """The search attributes a run has from its start: its tenant and priority (which the tenant's
    limit counts, ratchet/client/tenants.py); and with `shown` (RATCHET_SEARCH_ATTRIBUTES, and the
    namespace knows them), what it shows until its worker has something else to say: its
    agent, RUNNING, no approval awaited, the run a shadow shadows. A run waiting for a worker is
    listed by its agent, and its first workflow task upserts nothing (workflows/visibility.py takes
    what the start set as published)."""
    pairs: list[SearchAttributePair[Any]] = list(tenant_attributes(run))
    if shown:
        pairs += [
            SearchAttributePair(key(RunAttributes.AGENT), run.agent),
            SearchAttributePair(key(RunAttributes.PHASE), WORKING),
            SearchAttributePair(key(RunAttributes.AWAITING_APPROVAL), False),
        ]
        if run.shadow is not None:
            pairs.append(SearchAttributePair(key(RunAttributes.SHADOW_OF), run.shadow.workflow_id))
    return TypedSearchAttributes(pairs)


def start_summary(run: AgentRun) -> str:
    """The run's static summary in the Temporal Web UI: its agent and objective (encrypted as
    payloads are, when the client has codec keys)."""
    objective = run.objective if len(run.objective) <= 200 else run.objective[:199] + "…"
    return f"{run.agent}: {objective}"


def validated_run(run: AgentRun | Mapping[str, Any] | str) -> AgentRun:
    """An `AgentRun` from itself, its fields or its JSON; InvalidInput names what is wrong."""
    if isinstance(run, AgentRun):
        return run
    if isinstance(run, str):
        try:
            run = json.loads(run)
        except ValueError as exc:
            raise InvalidInput("run", [f"not JSON: {exc}"]) from None
        if not isinstance(run, Mapping):
            raise InvalidInput("run", [f"must be a JSON object (the run), not {type(run).__name__}"])
    try:
        return AgentRun.model_validate(dict(run))
    except ValidationError as exc:
        raise InvalidInput.of("run", exc) from None
