"""A session keeps its tenant and priority across its turns and its continue-as-new: the continued
runs' model calls carry them as the first run's did (read with the `temporal` CLI)."""

from __future__ import annotations

import json
import uuid

from ratchet.contracts import Phase
from tests.runs import start, temporal_cli, wait_for
from tests.sessions.test_sessions import awaiting, session


async def model_calls(address: str, workflow_id: str, run_id: str) -> list[dict]:
    code, out = await temporal_cli(address, "workflow", "show", "-w", workflow_id, "-r", run_id, "-o", "json")
    assert code == 0, out
    events = json.loads(out)["events"]
    scheduled = [e["activityTaskScheduledEventAttributes"] for e in events if "activityTaskScheduledEventAttributes" in e]
    return [a["priority"] for a in scheduled if a["activityType"]["name"] == "model.call"]


async def test_a_sessions_continuations_keep_its_tenant_and_priority(client, settings, worker):
    tenant = f"sess-{uuid.uuid4().hex[:8]}"
    script = [{"content": "one"}, {"content": "two"}, {"content": "three"}]
    run = await start(client, settings, {**session(script, turns_per_run=1), "tenant": tenant, "priority": 4})
    await wait_for(run, awaiting)
    for question in ("question 2", "question 3"):
        await run.ask(question)
    state = await wait_for(run, awaiting)
    assert state.continued >= 2 and (state.run.tenant, state.run.priority) == (tenant, 4)
    await run.close()
    assert (await run.result()).phase == Phase.DONE

    code, out = await temporal_cli(
        settings.temporal_address, "workflow", "list", "--query", f'WorkflowId="{run.workflow_id}"', "-o", "json"
    )
    assert code == 0, out
    executions = [e["execution"]["runId"] for e in json.loads(out)]
    assert len(executions) >= 3, "the session continued as new after each turn"
    priorities = [p for r in executions for p in await model_calls(settings.temporal_address, run.workflow_id, r)]
    assert len(priorities) == 3 and all(p == {"priorityKey": 7, "fairnessKey": tenant} for p in priorities), priorities
