"""Tenants at start: the workflow's task priority (the run's priority band, its tenant as the
fairness key with the tenant's weight: ratchet/contracts/tenancy.py), and the tenant's limit on
open runs (RATCHET_TENANT_MAX_OPEN), refused or waited for (RATCHET_TENANT_OVER_LIMIT), and its
cost cap per UTC day (RATCHET_TENANT_DAILY_USD), from the billing ledger's running total.

The limit is counted in Temporal's visibility store: the runs with the tenant's `RatchetTenant`
(set at start, so a run counts from its first moment) still running. No lock is taken: starts of
one tenant racing each other within visibility's lag (milliseconds on the dev server, about a
second on Elasticsearch) can each see the same count, so a burst of concurrent starts may pass the
limit by the number that raced. Sub-agents count as open runs but are never refused (their parent
is running). docs/OPERATIONS.md, "Tenants and priorities"."""

from __future__ import annotations

import asyncio
import time

from temporalio.client import Client
from temporalio.common import Priority, SearchAttributePair
from temporalio.service import RPCError

from ratchet.client.errors import Refused, rpc_error
from ratchet.contracts import AGENT_WORKFLOW, AgentRun, task_priority
from ratchet.contracts.search_attributes import RunAttributes
from ratchet.core.search_keys import key
from ratchet.ops.settings import Settings

QUEUE_POLL_S = 0.5
"""How often a queued start counts its tenant's open runs again."""


class TenantLimitReached(Refused):
    """The run's tenant has as many open runs as its limit allows (RATCHET_TENANT_MAX_OPEN)."""

    def __init__(self, tenant: str, limit: int, waited_s: float | None) -> None:
        waited = f" after waiting {waited_s:.0f} s for a slot" if waited_s is not None else ""
        super().__init__(
            "start",
            f"tenant {tenant!r} has {limit} open runs, its limit (RATCHET_TENANT_MAX_OPEN){waited}; "
            "start it again when one has closed",
        )
        self.tenant, self.limit = tenant, limit


def workflow_priority(run: AgentRun, settings: Settings) -> Priority:
    """The run's workflow tasks' priority: its band's key for everything but model calls, its
    tenant with the tenant's weight."""
    task = task_priority(run.tenant, run.priority, settings.tenant_weight(run.tenant), model_path=False)
    return Priority(
        priority_key=task.priority_key, fairness_key=task.fairness_key, fairness_weight=task.fairness_weight
    )


def tenant_attributes(run: AgentRun) -> list[SearchAttributePair[str]]:
    """The search attributes a run has from its start for its tenant (which the limit counts) and priority."""
    given = ((RunAttributes.TENANT, run.tenant), (RunAttributes.PRIORITY, run.priority))
    return [SearchAttributePair(key(a), str(v)) for a, v in given if v is not None]


async def open_runs(temporal: Client, tenant: str) -> int:
    """The tenant's runs still running, as visibility counts them."""
    query = f'WorkflowType="{AGENT_WORKFLOW}" AND ExecutionStatus="Running" AND {RunAttributes.TENANT}="{tenant}"'
    try:
        return (await temporal.count_workflows(query)).count
    except RPCError as exc:
        raise rpc_error(f"cannot count tenant {tenant!r}'s open runs", exc, temporal.service_client.config.target_host)


class TenantCapReached(Refused):
    """The run's tenant was billed its cost cap for the day already (RATCHET_TENANT_DAILY_USD)."""

    def __init__(self, tenant: str, cap: float, spent: float) -> None:
        super().__init__(
            "start",
            f"tenant {tenant!r} was billed ${spent:.4f} today (UTC), its daily cost cap of ${cap:g} "
            "(RATCHET_TENANT_DAILY_USD): start it again tomorrow, or raise the cap",
        )
        self.tenant, self.cap, self.spent = tenant, cap, spent


def spent_today(settings: Settings, tenant: str) -> float:
    """What `tenant` was billed since the UTC day began, across its runs (the billing ledger in the
    ledger's database, which the workers write)."""
    from ratchet.stores.billing import BillingStore

    return BillingStore.open(settings.ledger_store_url).spent_today(tenant)


async def admit(temporal: Client, settings: Settings, run: AgentRun) -> None:
    """Return when the run's tenant is under its daily cost cap (else TenantCapReached) and under
    its limit on open runs; TenantLimitReached at once (`refuse`) or after
    RATCHET_TENANT_QUEUE_TIMEOUT_S of waiting for a slot (`queue`)."""
    cap = settings.tenant_daily_cap(run.tenant)
    if run.tenant is not None and cap is not None:
        spent = await asyncio.to_thread(spent_today, settings, run.tenant)
        if spent >= cap:
            raise TenantCapReached(run.tenant, cap, spent)
    limit = settings.tenant_limit(run.tenant)
    if run.tenant is None or limit is None:
        return
    began = time.monotonic()
    while await open_runs(temporal, run.tenant) >= limit:
        waited = time.monotonic() - began
        if settings.tenant_over_limit == "refuse":
            raise TenantLimitReached(run.tenant, limit, None)
        if waited >= settings.tenant_queue_timeout_s:
            raise TenantLimitReached(run.tenant, limit, waited)
        await asyncio.sleep(min(QUEUE_POLL_S, settings.tenant_queue_timeout_s - waited))
