"""How a worker joins its Worker Deployment: the versioning config every worker of the process
gets (the task queue's, the host queue's, the model queues'), and the first build made current."""

from __future__ import annotations

import logging

from temporalio.client import Client
from temporalio.service import RPCError
from temporalio.common import VersioningBehavior, WorkerDeploymentVersion
from temporalio.worker import WorkerDeploymentConfig

from ratchet.ops.settings import Settings
from .deployments import DeploymentError, describe, make_current_if_first, set_current

log = logging.getLogger("ratchet.deploys")


def deployment_config(settings: Settings, build_id: str) -> WorkerDeploymentConfig:
    """Every workflow PINNED to the build it started on: a one-shot run finishes there; a session
    moves itself at a turn boundary, by continuing as new onto the deployment's target build
    (workflows/upgrades.py), so no run ever replays on code it did not start with."""
    return WorkerDeploymentConfig(
        version=WorkerDeploymentVersion(settings.deployment_name, build_id),
        use_worker_versioning=True,
        default_versioning_behavior=VersioningBehavior.PINNED,
    )


async def promote_on_start(client: Client, deployment: str, build_id: str, promote: str) -> None:
    """Per RATCHET_PROMOTE, once this build has registered (its first poll): `first` makes it
    current if the deployment has no current build, `always` makes it current, `never` leaves the
    routing to `ratchet deploy`. Says which build new runs go to."""
    current: str | None
    try:
        if promote == "always":
            await make_current_if_first(client, deployment, build_id)  # waits for the registration
            found = await describe(client, deployment)
            if found is not None and found.current != build_id:
                await set_current(client, deployment, build_id)
            current = build_id
        elif promote == "first":
            _, current = await make_current_if_first(client, deployment, build_id)
        else:
            found = await describe(client, deployment)
            current = found.current if found is not None else None
    except (DeploymentError, RPCError) as exc:  # the worker runs on; `ratchet deploy` can route to it
        log.warning("deployment %r: build %s not made current: %s", deployment, build_id, exc)
        return
    if current == build_id:
        log.info("build %s is current in deployment %r: new runs start on it", build_id, deployment)
    else:
        log.info(
            "build %s joined deployment %r; new runs start on %s: `ratchet deploy ramp %s 10` or "
            "`ratchet deploy promote %s` moves them here",
            build_id,
            deployment,
            current or "no build yet",
            build_id,
            build_id,
        )
