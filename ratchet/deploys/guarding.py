"""The deploy guard and flags from the client's side (what `ratchet deploy ramp --guard`, `ratchet
deploy status`, `ratchet flag` and the console call): start a guard after checking everything a
person can get wrong, read its status, stop it; flag a run's outcome as bad.

Nothing here imports the worker side: the guard is started by its workflow type's name, with the
contracts as its input (workflows/deploy_guard.py, workflows/flags.py run them). Every refusal is a
`DeploymentError` saying what is wrong and what there is, and changes nothing.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowHandle,
)
from temporalio.common import (
    PinnedVersioningOverride,
    SearchAttributePair,
    TypedSearchAttributes,
    WorkerDeploymentVersion,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from ratchet.contracts import (
    AGENT_WORKFLOW,
    FLAG_WORKFLOW,
    GUARD_STATUS_QUERY,
    GUARD_STOP_SIGNAL,
    GUARD_WORKFLOW,
    FlagRecord,
    GuardInput,
    GuardRequest,
    GuardStatus,
    RunAttributes,
    flag_id,
    guard_id,
)
from ratchet.contracts.guard import parse_criteria, request_problems
from ratchet.core.search_keys import key
from . import deployments
from .deployments import DeploymentError

BUILD = key(RunAttributes.BUILD)
AGENT = key(RunAttributes.AGENT)
QUERY_TIMEOUT_S = 10.0
"""How long a running guard's status is waited for (a worker of its build answers the query)."""
STOP_WAIT_S = 30.0
"""How long `stop_guard` waits for the guard to record its stop (a worker of its build runs it)."""


async def start_guard(client: Client, task_queue: str, request: GuardRequest) -> str:
    """Start the guard of `request.deployment` on `task_queue` (its workers' queue); returns its
    workflow id. The guard ramps the build to the first step itself. Refused (`DeploymentError`,
    nothing changed): criteria that do not parse (naming the term or text), a percentage outside
    0-100, an unknown build or one no worker polls, a build that is current already, no current
    build to compare with, a guard already running for the deployment."""
    problems = request_problems(request)
    try:
        parse_criteria(request.criteria)
    except ValueError as exc:
        problems.insert(0, str(exc))
    if problems:
        raise DeploymentError("; ".join(problems))
    deployment, build = request.deployment, request.build
    found = await deployments.require(client, deployment, build)
    if found.current is None:
        raise DeploymentError(f"deployment {deployment!r} has no current build to compare {build!r} with")
    if found.current == build:
        raise DeploymentError(f"build {build!r} is current in {deployment!r} already: nothing to ramp")
    if request.baseline is not None and request.baseline != found.current:
        raise DeploymentError(
            f"baseline {request.baseline!r} is not the current build of {deployment!r} ({found.current!r})"
        )
    for needed in (build, found.current):  # the ramped build takes runs there; the current one runs the guard
        if task_queue not in await deployments.task_queues(client, deployment, needed):
            raise DeploymentError(
                f"no worker of build {needed!r} of deployment {deployment!r} polls task queue {task_queue!r}: "
                "start one first"
            )
    request = request.model_copy(update={"baseline": found.current})
    try:
        handle = await client.start_workflow(
            GUARD_WORKFLOW,
            GuardInput(request=request),
            id=guard_id(deployment),
            task_queue=task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
            id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
            versioning_override=PinnedVersioningOverride(WorkerDeploymentVersion(deployment, found.current)),
        )
    except WorkflowAlreadyStartedError:
        raise DeploymentError(
            f"a guard already watches deployment {deployment!r} ({guard_id(deployment)}): stop it first"
        ) from None
    return handle.id


async def guard_status(client: Client, deployment: str) -> GuardStatus | None:
    """The guard's status: asked while it runs, its result once it has ended; None if no guard ever
    ran for `deployment`. A guard that was terminated or failed outright, or whose build has no
    worker to answer, is a `DeploymentError` saying so."""
    handle = client.get_workflow_handle(guard_id(deployment), result_type=GuardStatus)
    status = await _status_of(handle)
    if status is None:
        return None
    if status == WorkflowExecutionStatus.RUNNING:
        try:
            found = await handle.query(
                GUARD_STATUS_QUERY, result_type=GuardStatus, rpc_timeout=timedelta(seconds=QUERY_TIMEOUT_S)
            )
        except RPCError as exc:
            if exc.status not in (RPCStatusCode.CANCELLED, RPCStatusCode.DEADLINE_EXCEEDED):  # the SDK's timeout
                raise
            raise DeploymentError(
                f"the guard of {deployment!r} did not answer in {QUERY_TIMEOUT_S:g}s: is a worker of its build "
                "(the baseline) running?"
            ) from None
        if found is None:
            raise DeploymentError(f"the guard of {deployment!r} has not started yet")
        return found
    if status == WorkflowExecutionStatus.COMPLETED:
        return await handle.result()
    raise DeploymentError(f"the guard of {deployment!r} ended {status.name} without a status")


async def stop_guard(client: Client, deployment: str) -> None:
    """Stop the running guard of `deployment`, leaving the routing as it is; waits (up to
    `STOP_WAIT_S`) until it has recorded the stop."""
    handle = client.get_workflow_handle(guard_id(deployment), result_type=GuardStatus)
    if await _status_of(handle) != WorkflowExecutionStatus.RUNNING:
        raise DeploymentError(f"no guard runs for deployment {deployment!r}")
    await handle.signal(GUARD_STOP_SIGNAL, "stopped by a person")
    try:
        await asyncio.wait_for(handle.result(), STOP_WAIT_S)
    except TimeoutError:
        pass  # recorded by the guard once a worker of its build runs it


async def flag(client: Client, task_queue: str, run_id: str, reason: str, by: str | None) -> str:
    """Mark run `run_id`'s outcome bad (running or closed): a `RatchetFlag` marker (workflows/flags.py)
    naming the run's build and agent, which the deploy guard counts. The same flag twice is one.
    Returns the flag's workflow id."""
    reason = reason.strip()
    if not reason:
        raise DeploymentError("a flag needs a reason")
    try:
        described = await client.get_workflow_handle(run_id).describe()
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            raise DeploymentError(f"no run {run_id!r}") from None
        raise
    if described.workflow_type != AGENT_WORKFLOW:
        raise DeploymentError(f"{run_id!r} is a {described.workflow_type}, not an agent run")
    attributes = described.typed_search_attributes
    build, agent = attributes.get(BUILD), attributes.get(AGENT)
    record = FlagRecord(run_id=run_id, reason=reason, by=by, build=build, agent=agent)
    pairs = [SearchAttributePair(key, value) for key, value in ((BUILD, build), (AGENT, agent)) if value]
    workflow_id = flag_id(run_id, reason)
    try:
        await client.start_workflow(
            FLAG_WORKFLOW,
            record,
            id=workflow_id,
            task_queue=task_queue,
            search_attributes=TypedSearchAttributes(pairs),
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
        )
    except WorkflowAlreadyStartedError:
        pass  # flagged for this reason already
    return workflow_id


async def _status_of(handle: WorkflowHandle) -> WorkflowExecutionStatus | None:
    try:
        described = await handle.describe()
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return None
        raise
    return described.status
