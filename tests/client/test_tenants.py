"""Tenants on the dev server: a run's tenant and priority on its workflow and on every task it
schedules (model calls first in its band), its sub-agents', visible in state, listings and
`temporal workflow list`; the per-tenant limit on open runs, refused or queued."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import pytest
from temporalio.api.history.v1 import HistoryEvent

from ratchet.client import InvalidInput, RatchetClient, RunHandle
from ratchet.client.tenants import TenantLimitReached
from ratchet.contracts import Phase
from ratchet.worker.main import build_worker
from tests.runs import runs, scripted, start, temporal_cli, wait_for
from tests.workflows.test_sub_agents import delegate

WAIT = [{"tool_calls": [{"name": "probe_wait", "arguments": {"seconds": 60}}]}, {"content": "never"}]
ONE_TOOL = [{"tool_calls": [{"name": "probe_echo", "arguments": {"text": "hi"}}]}, {"content": "done"}]


def scheduled(events: list[HistoryEvent]) -> dict[str, tuple[int, str, float]]:
    """Each activity type's (priority key, fairness key, weight), as the history recorded it."""
    found = {}
    for event in events:
        if event.HasField("activity_task_scheduled_event_attributes"):
            attributes = event.activity_task_scheduled_event_attributes
            p = attributes.priority
            found[attributes.activity_type.name] = (p.priority_key, p.fairness_key, round(p.fairness_weight, 3))
    return found


def tenant_id() -> str:
    return f"acme-{uuid.uuid4().hex[:8]}"


async def test_a_runs_tasks_carry_its_tenant_weight_and_priority_model_calls_first(client, settings):
    tenant = tenant_id()
    weighted = settings.model_copy(update={"tenant_weights": f"{tenant}:3"})  # the client's and the worker's
    async with build_worker(client, weighted, graceful_shutdown_timeout=timedelta(0)):
        run = await RatchetClient(client, weighted).start(scripted("probe", ONE_TOOL, tenant=tenant, priority=2))
        assert (await run.result()).phase == Phase.DONE
        state = await run.state()
    events = list((await run.history()).events)
    started = events[0].workflow_execution_started_event_attributes.priority
    assert (started.priority_key, started.fairness_key, started.fairness_weight) == (4, tenant, 3.0)
    tasks = scheduled(events)
    assert tasks["model.call"][:2] == (3, tenant), "a model call runs at 2p - 1, before the run's other tasks"
    assert tasks["tool.probe_echo"][:2] == (4, tenant) and tasks["run.prepare"][:2] == (3, tenant)
    # planning inherits the workflow's weight (0: unset); the plan has the worker's for the rest
    assert tasks["run.prepare"][2] == 0.0 and tasks["model.call"][2] == tasks["tool.probe_echo"][2] == 3.0
    assert (state.run.tenant, state.run.priority) == (tenant, 2)
    listed = await runs(client, settings).list(tenant=tenant)
    assert [(r.workflow_id, r.tenant, r.priority) for r in listed] == [(run.workflow_id, tenant, 2)]
    code, out = await temporal_cli(
        settings.temporal_address, "workflow", "list", "--query", f'RatchetTenant="{tenant}"', "-o", "json"
    )
    assert code == 0 and run.workflow_id in out


async def test_a_run_without_a_tenant_keeps_the_default_band(client, settings, worker):
    run = await start(client, settings, scripted("probe", ONE_TOOL))
    assert (await run.result()).phase == Phase.DONE
    tasks = scheduled(list((await run.history()).events))
    assert tasks["model.call"] == (5, "", 0.0) and tasks["tool.probe_echo"] == (6, "", 0.0)
    assert (await run.summary()).tenant is None


async def test_a_sub_agent_keeps_its_parents_tenant_and_priority(client, settings, worker):
    tenant = tenant_id()
    child = {"provider": "scripted", "options": {"script": [{"content": "child done"}]}}
    script = [delegate(agent="probe", objective="help", model=child), {"content": "ok"}]
    parent = await start(client, settings, scripted("boss", script, workspace="t", tenant=tenant, priority=1))
    assert (await parent.result()).phase == Phase.DONE
    listed = {r.workflow_id: r for r in await runs(client, settings).list(tenant=tenant)}
    assert len(listed) == 2 and all(r.priority == 1 for r in listed.values())
    child_id = next(i for i in listed if i != parent.workflow_id)
    child_run = runs(client, settings).get(child_id)
    assert ((await child_run.state()).run.tenant, (await child_run.state()).run.priority) == (tenant, 1)
    events = list((await child_run.history()).events)
    assert events[0].workflow_execution_started_event_attributes.priority.fairness_key == tenant
    assert scheduled(events)["model.call"][:2] == (1, tenant)


@pytest.mark.parametrize(
    ("run", "field"),
    [({"tenant": "x" * 65}, "tenant"), ({"tenant": " "}, "tenant"), ({"priority": 6}, "priority")],
)
async def test_bad_tenant_or_priority_is_refused_naming_the_field(client, settings, run, field):
    with pytest.raises(InvalidInput) as refused:
        await start(client, settings, scripted("probe", ONE_TOOL, **run))
    assert field in str(refused.value)


async def _waiting(client, settings, tenant: str) -> RunHandle:
    run = await RatchetClient(client, settings).start(scripted("saga", WAIT, tenant=tenant))
    await wait_for(run, lambda s: s.step == 1 and s.phase == Phase.ACTING)
    return run


async def test_a_start_over_the_tenants_limit_is_refused_and_starts_nothing(client, settings, worker):
    tenant = tenant_id()
    limited = settings.model_copy(update={"tenant_max_open": f"{tenant}:1"})
    first = await _waiting(client, limited, tenant)
    with pytest.raises(TenantLimitReached) as refused:
        await RatchetClient(client, limited).start(scripted("probe", ONE_TOOL, tenant=tenant))
    assert tenant in refused.value.reason and "RATCHET_TENANT_MAX_OPEN" in refused.value.reason
    assert [r.workflow_id for r in await runs(client, settings).list(tenant=tenant)] == [first.workflow_id]
    other = await RatchetClient(client, limited).start(scripted("probe", ONE_TOOL, tenant=tenant_id()))
    assert (await other.result()).phase == Phase.DONE, "another tenant is not limited"
    await first.terminate("test over")


async def test_a_queued_start_waits_for_a_slot(client, settings, worker):
    tenant = tenant_id()
    queued = settings.model_copy(
        update={"tenant_max_open": f"{tenant}:1", "tenant_over_limit": "queue", "tenant_queue_timeout_s": 0.5}
    )
    first = await _waiting(client, queued, tenant)
    with pytest.raises(TenantLimitReached) as refused:  # no slot within the wait
        await RatchetClient(client, queued).start(scripted("probe", ONE_TOOL, tenant=tenant))
    assert "after waiting" in refused.value.reason

    patient = queued.model_copy(update={"tenant_queue_timeout_s": 60.0})
    second = asyncio.create_task(RatchetClient(client, patient).start(scripted("probe", ONE_TOOL, tenant=tenant)))
    await first.terminate("make room")
    started = await second
    assert (await started.result()).phase == Phase.DONE
