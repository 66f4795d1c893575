"""A Worker Deployment as Ratchet reads and moves it: the one module that calls Temporal's worker
deployment RPCs (describe, set current, set ramping). Used by `ratchet worker` (a first build
makes itself current), `ratchet.client`'s deploy verbs and the ramp guard's activities.

The plain Temporal CLI does the same: `temporal worker deployment describe --name D`,
`set-current-version --deployment-name D --build-id B`, `set-ramping-version ... --percentage P`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, UTC
from typing import Any, TypeVar

from temporalio.api.deployment.v1 import WorkerDeploymentVersion as VersionProto
from temporalio.api.enums.v1 import (
    RoutingConfigUpdateState,
    TaskQueueType,
    VersionDrainageStatus,
    WorkerDeploymentVersionStatus,
)
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import (
    DescribeTaskQueueRequest,
    DescribeWorkerDeploymentRequest,
    DescribeWorkerDeploymentVersionRequest,
    SetWorkerDeploymentCurrentVersionRequest,
    SetWorkerDeploymentRampingVersionRequest,
)
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

T = TypeVar("T")
IDENTITY = "ratchet"
EPOCH = datetime.min.replace(tzinfo=UTC)
BUSY_RETRY_S = 20.0
"""How long a request the server refuses as too frequent (it limits requests per deployment) is
retried, with growing pauses."""


class DeploymentError(Exception):
    """A deployment request that cannot be done as asked (unknown deployment or build, a build no
    worker polls, a percentage outside 0-100): the message says which and what there is."""


@dataclass(frozen=True)
class Version:
    build_id: str
    status: str
    """CURRENT, RAMPING, DRAINING (runs still pinned to it), DRAINED, INACTIVE (never current), CREATED."""
    created: datetime | None
    drained: bool | None
    """None: the server has not checked yet (only versions that stopped taking new runs are checked)."""
    last_current: datetime | None = None
    """When it last became current (None: never): a deploy's rollback goes back to the version other
    than the current one that became current last (`previous`)."""


@dataclass(frozen=True)
class Deployment:
    name: str
    current: str | None
    """The build new runs start on (and runs that upgrade move to); None: no build is current yet."""
    ramping: str | None
    ramp_percentage: float
    """The share of new runs (by workflow id) that start on `ramping` instead."""
    versions: tuple[Version, ...]
    conflict_token: bytes = b""
    """Given back to a change, it fails if the routing changed since this was read."""
    routing_settled: bool = True
    """The last routing change has reached every task queue of the deployment (until then, a
    workflow task may still go by the routing before it)."""

    def version(self, build_id: str) -> Version | None:
        return next((v for v in self.versions if v.build_id == build_id), None)

    @property
    def previous(self) -> str | None:
        """The build that was current before the current one (None: no other build ever was)."""
        earlier = [v for v in self.versions if v.build_id != self.current and v.last_current is not None]
        return max(earlier, key=lambda v: v.last_current or EPOCH).build_id if earlier else None

    @property
    def build_ids(self) -> list[str]:
        return [v.build_id for v in self.versions]


async def _call(rpc: Callable[[Any], Awaitable[T]], request: Any) -> T:
    """`rpc(request)`, again after a pause while the server says the deployment is busy."""
    loop = asyncio.get_running_loop()
    deadline, pause = loop.time() + BUSY_RETRY_S, 0.1
    while True:
        try:
            return await rpc(request)
        except RPCError as exc:
            if exc.status != RPCStatusCode.RESOURCE_EXHAUSTED or loop.time() + pause > deadline:
                raise
        await asyncio.sleep(pause)
        pause = min(pause * 2, 2.0)


def _time(message: Any, field: str) -> datetime | None:
    return getattr(message, field).ToDatetime(UTC) if message.HasField(field) else None


def _status(value: WorkerDeploymentVersionStatus.ValueType) -> str:
    return WorkerDeploymentVersionStatus.Name(value).removeprefix("WORKER_DEPLOYMENT_VERSION_STATUS_")


async def describe(client: Client, deployment: str) -> Deployment | None:
    """The deployment's versions and routing; None if it has none (no worker of it ever polled)."""
    try:
        response = await _call(
            client.workflow_service.describe_worker_deployment,
            DescribeWorkerDeploymentRequest(namespace=client.namespace, deployment_name=deployment),
        )
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return None
        raise
    info = response.worker_deployment_info
    routing = info.routing_config
    versions = tuple(
        Version(
            build_id=s.deployment_version.build_id,
            status=_status(s.status),
            created=s.create_time.ToDatetime() if s.HasField("create_time") else None,
            drained=(s.drainage_info.status == VersionDrainageStatus.VERSION_DRAINAGE_STATUS_DRAINED)
            if s.HasField("drainage_info")
            else None,
            last_current=_time(s, "last_current_time"),
        )
        for s in info.version_summaries
    )
    ramping = routing.ramping_deployment_version.build_id if routing.HasField("ramping_deployment_version") else None
    return Deployment(
        name=info.name,
        current=routing.current_deployment_version.build_id if routing.HasField("current_deployment_version") else None,
        ramping=ramping or None,
        ramp_percentage=float(routing.ramping_version_percentage) if ramping else 0.0,
        versions=tuple(sorted(versions, key=lambda v: v.created or datetime.min)),
        conflict_token=response.conflict_token,
        routing_settled=info.routing_config_update_state
        != RoutingConfigUpdateState.ROUTING_CONFIG_UPDATE_STATE_IN_PROGRESS,
    )


async def require(client: Client, deployment: str, build_id: str | None = None) -> Deployment:
    """The deployment, which must exist (and know `build_id`): DeploymentError naming what there is."""
    found = await describe(client, deployment)
    if found is None:
        raise DeploymentError(f"no worker deployment {deployment!r}: no worker of it has polled yet (start one)")
    if build_id is not None and found.version(build_id) is None:
        raise DeploymentError(
            f"build {build_id!r} is unknown to deployment {deployment!r}: no worker of it has polled "
            f"(builds: {', '.join(found.build_ids) or 'none'})"
        )
    return found


async def task_queues(client: Client, deployment: str, build_id: str) -> set[str]:
    """The task queues workers of `build_id` have polled (each name once, whatever its type)."""
    return {name for name, _ in await _typed_queues(client, deployment, build_id)}


async def _typed_queues(client: Client, deployment: str, build_id: str) -> set[tuple[str, TaskQueueType.ValueType]]:
    """`build_id`'s task queues with their types (workflow, activity); none for a version the server
    does not know (yet: it lists a new version in the deployment a moment before it describes it)."""
    try:
        response = await _call(
            client.workflow_service.describe_worker_deployment_version,
            DescribeWorkerDeploymentVersionRequest(
                namespace=client.namespace,
                deployment_version=VersionProto(deployment_name=deployment, build_id=build_id),
            ),
        )
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return set()
        raise
    return {(info.name, info.type) for info in response.worker_deployment_version_info.task_queue_infos}


POLLED_WITHIN = timedelta(minutes=2)
"""A build whose workers polled no task queue for this long has no worker: a worker's long polls
last about a minute each, and the server keeps a poller listed for minutes after it went."""


async def polled(client: Client, deployment: str, build_id: str) -> bool:
    """Whether a worker of `build_id` has polled one of its workflow task queues lately (`POLLED_WITHIN`)."""
    since = datetime.now(UTC) - POLLED_WITHIN
    for queue in sorted(await task_queues(client, deployment, build_id)):
        response = await _call(
            client.workflow_service.describe_task_queue,
            DescribeTaskQueueRequest(
                namespace=client.namespace,
                task_queue=TaskQueue(name=queue),
                task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
            ),
        )
        for poller in response.pollers:
            seen = _time(poller, "last_access_time")
            if poller.deployment_options.build_id == build_id and seen is not None and seen >= since:
                return True
    return False


async def require_polled(client: Client, deployment: str, build_id: str) -> None:
    """DeploymentError unless a worker of `build_id` polls now: runs routed to it would wait."""
    if not await polled(client, deployment, build_id):
        raise DeploymentError(
            f"no worker of build {build_id!r} polls deployment {deployment!r} now (none in the last "
            f"{POLLED_WITHIN.total_seconds() / 60:g} minutes): start one first, or runs sent to it would wait"
        )


async def _check_queues(client: Client, found: Deployment, build_id: str) -> None:
    """A build that becomes current (or ramps) must serve every task queue the current build serves,
    but hosts' own queues (`{task queue}@{host}`): a new build's hosts have queues of their own, and
    the old hosts' queues keep serving the runs pinned to the old build. Refuses naming the others."""
    if found.current is None or found.current == build_id:
        return
    missing = await task_queues(client, found.name, found.current) - await task_queues(client, found.name, build_id)
    shared = sorted(q for q in missing if "@" not in q)
    if shared:
        raise DeploymentError(
            f"build {build_id!r} has no worker on task queue(s) {', '.join(shared)} that build {found.current!r} "
            "serves: start its workers there first"
        )


async def set_current(
    client: Client, deployment: str, build_id: str, identity: str = IDENTITY, conflict_token: bytes = b""
) -> str | None:
    """Make `build_id` current (a ramp of it ends); returns the build that was current.
    `conflict_token` (from `describe`): refused if the routing changed since."""
    await _check_queues(client, await require(client, deployment, build_id), build_id)
    try:
        response = await _call(
            client.workflow_service.set_worker_deployment_current_version,
            SetWorkerDeploymentCurrentVersionRequest(
                namespace=client.namespace,
                deployment_name=deployment,
                build_id=build_id,
                identity=identity,
                conflict_token=conflict_token,
                ignore_missing_task_queues=True,  # hosts' own queues: checked above
            ),
        )
    except RPCError as exc:
        raise _refused(deployment, build_id, exc) from None
    await settled(client, deployment)
    previous = response.previous_deployment_version.build_id
    return previous or None


async def set_ramping(
    client: Client, deployment: str, build_id: str | None, percentage: float, identity: str = IDENTITY
) -> None:
    """Send `percentage` of new runs (and upgrading ones) to `build_id`; None: no ramp."""
    if not 0 <= percentage <= 100:
        raise DeploymentError(f"ramp percentage {percentage:g} is outside 0-100")
    if build_id is not None:
        found = await require(client, deployment, build_id)
        if found.current == build_id:
            raise DeploymentError(f"build {build_id!r} is current in {deployment!r} already: nothing to ramp")
        await _check_queues(client, found, build_id)
    try:
        await _call(
            client.workflow_service.set_worker_deployment_ramping_version,
            SetWorkerDeploymentRampingVersionRequest(
                namespace=client.namespace,
                deployment_name=deployment,
                build_id=build_id or "",
                percentage=percentage if build_id is not None else 0.0,
                identity=identity,
                ignore_missing_task_queues=True,  # hosts' own queues: checked above
            ),
        )
    except RPCError as exc:
        raise _refused(deployment, build_id, exc) from None
    await settled(client, deployment)


async def settled(client: Client, deployment: str, timeout_s: float = 120.0) -> None:
    """Until the deployment's last routing change has reached all its task queues: a change takes
    effect for runs (a session's move, a new run's build) only from then on. The deployment says so
    (`routing_settled`), or, when it still says in progress, its builds' task queues each report the
    new routing: the server can leave the flag in progress after the change has arrived
    (temporalio/temporal#11842; seen on a loaded dev server)."""
    loop = asyncio.get_running_loop()
    deadline, pause = loop.time() + timeout_s, 0.05
    while (found := await describe(client, deployment)) is not None and not found.routing_settled:
        if await _queues_route(client, found):
            return
        if loop.time() > deadline:
            raise DeploymentError(f"the routing of {deployment!r} did not reach its task queues in {timeout_s:g}s")
        await asyncio.sleep(pause)
        pause = min(pause * 2, 1.0)


async def _queues_route(client: Client, found: Deployment) -> bool:
    """Whether every task queue of the current and ramping builds routes as `found` says."""
    builds = {b for b in (found.current, found.ramping) if b}
    queues: set[tuple[str, TaskQueueType.ValueType]] = set()
    for build_id in builds:
        queues |= await _typed_queues(client, found.name, build_id)
    for name, kind in sorted(queues):
        response = await _call(
            client.workflow_service.describe_task_queue,
            DescribeTaskQueueRequest(namespace=client.namespace, task_queue=TaskQueue(name=name), task_queue_type=kind),
        )
        info = response.versioning_info
        if (
            info.current_deployment_version.build_id != (found.current or "")
            or info.ramping_deployment_version.build_id != (found.ramping or "")
            or (found.ramping and abs(info.ramping_version_percentage - found.ramp_percentage) > 1e-6)
        ):
            return False
    return bool(queues)


def _refused(deployment: str, build_id: str | None, exc: RPCError) -> Exception:
    if exc.status in (
        RPCStatusCode.FAILED_PRECONDITION,
        RPCStatusCode.INVALID_ARGUMENT,
        RPCStatusCode.NOT_FOUND,
        RPCStatusCode.ABORTED,
    ):
        return DeploymentError(f"deployment {deployment!r}, build {build_id!r}: {exc.message}")
    return exc


async def make_current_if_first(
    client: Client, deployment: str, build_id: str, timeout_s: float = 60.0
) -> tuple[bool, str | None]:
    """A worker's start: once its version is registered (its first poll), make it current if the
    deployment has no current build (its first build). Returns (made current, the current build)."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    delay = 0.05
    while True:
        found = await describe(client, deployment)
        if found is not None and found.version(build_id) is not None:
            break
        if asyncio.get_running_loop().time() > deadline:
            raise DeploymentError(f"build {build_id!r} did not register in {deployment!r} within {timeout_s:g}s")
        await asyncio.sleep(delay)
        delay = min(delay * 2, 2.0)
    if found.current is not None:
        return False, found.current
    try:
        await set_current(client, deployment, build_id, conflict_token=found.conflict_token)
    except DeploymentError:  # another worker made its build current meanwhile
        again = await describe(client, deployment)
        return False, again.current if again is not None else None
    return True, build_id
