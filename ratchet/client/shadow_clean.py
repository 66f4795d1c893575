"""`ratchet shadow clean` (`RatchetClient.shadows.clean`): a batch's shadows deleted, and what they
left outside their executions.

Each shadow still running is terminated first (it would go on writing); its closed state names its
private workspace and every host that held it (the last binding's, each failover's from-host). The
`RatchetShadowClean` workflow (workflows/shadow_clean.py) deletes those on the worker side, where
they are: the workspace by `workspace.remove` on each host's queue (a host gone is reported, its
copy stays), the ledger entries by `ledger.forget`. Then the shadows' executions (history, state,
stream) are deleted, and the cleaning workflow's. Only runs whose input marks them shadows
(`AgentRun.shadow`) are touched.

Content-addressed artifacts (transcript segments, manifests, patches) are not deleted: a digest
a shadow wrote may be one a production run holds too (the same files, the same messages), and the
store cannot tell whose it is.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.workflowservice.v1 import DeleteWorkflowExecutionRequest
from temporalio.client import Client, WorkflowFailureError
from temporalio.service import RPCError, RPCStatusCode

from ratchet.client.errors import RunFailed, RunNotFound, failure_reason, rpc_error
from ratchet.contracts.shadow import SHADOW_CLEAN_WORKFLOW, CleanShadows, ShadowCleaned, ShadowLeftovers


async def clean(
    temporal: Client, task_queue: str, get: Callable[[str], Any], shadows: list[str], host_timeout_s: float = 30.0
) -> list[ShadowCleaned]:
    """Every shadow of `shadows` deleted with what it left; what was deleted of each (a shadow
    already gone: nothing but its id). A host that does not take its deletion within
    `host_timeout_s` is reported gone (`ShadowCleaned.lost`)."""
    found = [await _leftovers(get(shadow)) for shadow in shadows]
    leftovers = [f for f in found if f is not None]
    request = CleanShadows(shadows=leftovers, host_timeout_s=host_timeout_s) if leftovers else None
    cleaned = {c.workflow_id: c for c in await _on_workers(temporal, task_queue, request)} if request else {}
    for shadow in shadows:
        await delete(temporal, shadow)
    return [cleaned.get(shadow) or ShadowCleaned(workflow_id=shadow) for shadow in shadows]


async def _leftovers(handle: Any) -> ShadowLeftovers | None:
    """What the shadow behind `handle` left (None: it is gone, or is no shadow)."""
    try:
        if await handle.running():
            await handle.terminate("ratchet shadow clean")
        state = await handle.closed_state()
    except RunNotFound:
        return None
    if state.run.shadow is None:  # never a production run's workspace or ledger entries
        return None
    hosts = [state.workspace.host, *(f.from_host for f in state.workspace.failovers)]
    workspace = state.plan.workspace if state.plan is not None and state.workspace.host else None
    return ShadowLeftovers(workflow_id=state.workflow_id, workspace=workspace, hosts=[h for h in hosts if h])


async def _on_workers(temporal: Client, task_queue: str, request: CleanShadows) -> list[ShadowCleaned]:
    cleaning = f"{SHADOW_CLEAN_WORKFLOW}-{uuid.uuid4().hex[:12]}"
    try:
        done = await temporal.execute_workflow(
            SHADOW_CLEAN_WORKFLOW,
            request,
            id=cleaning,
            task_queue=task_queue,
            result_type=list[ShadowCleaned],
        )
    except WorkflowFailureError as exc:
        raise RunFailed(cleaning, failure_reason(exc.cause or exc)) from None
    except RPCError as exc:
        raise rpc_error("cannot clean shadows", exc, temporal.service_client.config.target_host) from None
    await delete(temporal, cleaning)
    return done


async def delete(temporal: Client, workflow_id: str) -> None:
    """Delete the execution `workflow_id` (terminated first if it runs); one already gone is no error."""
    request = DeleteWorkflowExecutionRequest(
        namespace=temporal.namespace, workflow_execution=WorkflowExecution(workflow_id=workflow_id)
    )
    try:
        await temporal.workflow_service.delete_workflow_execution(request)
    except RPCError as exc:
        if exc.status != RPCStatusCode.NOT_FOUND:
            host = temporal.service_client.config.target_host
            raise rpc_error(f"cannot delete {workflow_id}", exc, host) from None
