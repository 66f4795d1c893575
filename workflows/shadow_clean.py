"""RatchetShadowClean: what shadows left on the worker side, deleted there (deterministic, no I/O).

`ratchet shadow clean` (ratchet/client/shadows.py) reads each shadow's state, then starts this
workflow with what it left: its private workspace on each host that held it and its ledger entries.
Each copy of the workspace is deleted by `workspace.remove` on its host's queue; a host that does
not take it within `host_timeout_s` (30 s) is gone, and the report says so (its copy, if any, stays). The
ledger entries go with `ledger.forget` on the shared queue. Then the client deletes the shadows'
executions and this workflow's.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError

from ratchet.contracts.activities import LEDGER_FORGET, WORKSPACE_REMOVE
from ratchet.contracts.shadow import (
    SHADOW_CLEAN_WORKFLOW,
    CleanShadows,
    ForgetRun,
    RemoveWorkspace,
    ShadowCleaned,
    ShadowLeftovers,
)
from . import calls
from .hosts import host_gone, host_name


@workflow.defn(name=SHADOW_CLEAN_WORKFLOW, sandboxed=False)  # outside the SDK's sandbox, as AgentWorkflow
class ShadowCleanWorkflow:
    @workflow.run
    async def run(self, request: CleanShadows) -> list[ShadowCleaned]:
        timeout = timedelta(seconds=request.host_timeout_s)
        return [await _clean(shadow, timeout) for shadow in request.shadows]


async def _clean(shadow: ShadowLeftovers, host_timeout: timedelta) -> ShadowCleaned:
    cleaned = ShadowCleaned(workflow_id=shadow.workflow_id)
    for host in dict.fromkeys(shadow.hosts) if shadow.workspace else ():
        try:
            await calls.call(
                WORKSPACE_REMOVE,
                RemoveWorkspace(workspace=shadow.workspace),
                summary=f"remove {shadow.workspace} on {host_name(host)}",
                task_queue=host,
                schedule_to_start_timeout=host_timeout,
            )
        except ActivityError as err:
            if not host_gone(err):
                raise
            cleaned.lost.append(host_name(host))
            continue
        cleaned.removed_on.append(host_name(host))
    cleaned.ledger_entries = await calls.call(
        LEDGER_FORGET, ForgetRun(workflow_id=shadow.workflow_id), summary=f"forget {shadow.workflow_id}"
    )
    return cleaned
