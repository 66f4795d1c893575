"""`ratchet start --tenant --priority`, `ratchet list --tenant` (its tenant and priority columns), a
start over the tenant's limit refused by the CLI, naming the tenant and the variable; a run started
by `temporal workflow start` with a tenant in its input."""

from __future__ import annotations

import json
import uuid

from ratchet.contracts import Phase
from tests.client.test_tenants import WAIT, scheduled
from tests.runs import ratchet, runs, scripted, start, temporal_cli, until, wait_for


async def test_start_and_list_by_tenant_and_a_start_over_its_limit(client, settings, worker, tmp_path):
    tenant = f"cli-{uuid.uuid4().hex[:8]}"
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"content": "done"}]))
    code, out = await ratchet(
        settings, "start", "probe", "say done", "--script", str(script), "--tenant", tenant, "--priority", "1"
    )
    assert code == 0, out
    started = out.split("started ", 1)[1].split()[0]
    assert (await runs(client, settings).get(started).result()).phase == Phase.DONE

    async def listed() -> str | None:
        code, out = await ratchet(settings, "list", "--tenant", tenant)
        return out if code == 0 and started in out else None

    out = await until(listed, "the run in `ratchet list --tenant`")
    row = next(line for line in out.splitlines() if started in line)
    assert row.split()[4:6] == [tenant, "1"], out

    waiting = await start(client, settings, scripted("saga", WAIT, tenant=tenant))
    await wait_for(waiting, lambda s: s.step == 1 and s.phase == Phase.ACTING)
    limit = {"RATCHET_TENANT_MAX_OPEN": f"{tenant}:1"}
    code, out = await ratchet(settings, "start", "probe", "one more", "--tenant", tenant, extra_env=limit)
    assert code == 2 and f"tenant '{tenant}' has 1 open runs" in out and "RATCHET_TENANT_MAX_OPEN" in out, out
    code, out = await ratchet(settings, "start", "probe", "x", "--tenant", "x" * 65)
    assert code == 2 and "tenant" in out and "at most 64" in out, out
    await waiting.terminate("test over")


async def test_a_run_started_with_the_plain_temporal_cli_takes_its_tenant_from_its_input(client, settings, worker):
    tenant = f"plain-{uuid.uuid4().hex[:8]}"
    run_input = scripted("probe", [{"content": "done"}], tenant=tenant, priority=5)
    workflow_id = f"plain-{uuid.uuid4().hex[:8]}"
    code, out = await temporal_cli(
        settings.temporal_address, "workflow", "start", "--type", "AgentWorkflow", "--task-queue", settings.task_queue,
        "--workflow-id", workflow_id, "--input", json.dumps(run_input),
    )
    assert code == 0, out
    run = runs(client, settings).get(workflow_id)
    assert (await run.result()).phase == Phase.DONE
    assert scheduled(list((await run.history()).events))["model.call"][:2] == (9, tenant)

    async def listed() -> bool:  # the run upserts RatchetTenant and RatchetPriority itself
        return [(r.workflow_id, r.priority) for r in await runs(client, settings).list(tenant=tenant)] == [(workflow_id, 5)]

    await until(listed, "the run listed by its tenant")
