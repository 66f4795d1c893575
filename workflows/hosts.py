"""Where a run's workspace activities go, and how a lost host shows (deterministic, no I/O).

A run's workspace is a directory on one host (`AgentState.workspace_host`, that host's task queue).
Every activity that touches it (workspace tools, their undos, `checkpoint.verify`) is scheduled on
that queue with a schedule-to-start timeout of `RunPolicy.host_timeout_s`: a host that does not
take it in time is gone, and the run fails over (workflows/failover.py).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio.exceptions import ApplicationError, TimeoutType
from temporalio.exceptions import TimeoutError as TemporalTimeout

from ratchet.contracts import ErrorType, RunPlan
from ratchet.workflows.errors import root


class HostLost(Exception):
    """A workspace activity was not taken by the host holding the workspace within the plan's
    `host_timeout_s`: the host is gone. The loop fails the run over to another host."""

    def __init__(self, host: str | None, what: str) -> None:
        super().__init__(f"{what}: host {host} did not take it (schedule-to-start timeout)")
        self.host = host


def on_host(host: str | None, plan: RunPlan) -> dict[str, Any]:
    """Activity options for a workspace activity on `host` (none without a host: the run's queue)."""
    if host is None:
        return {}
    return {"task_queue": host, "schedule_to_start_timeout": timedelta(seconds=plan.host_timeout_s)}


def host_gone(err: BaseException) -> bool:
    """The activity failed because no worker took it in time (the schedule-to-start timeout)."""
    err = root(err)
    return isinstance(err, TemporalTimeout) and err.type == TimeoutType.SCHEDULE_TO_START


def elsewhere(err: BaseException) -> bool:
    """A workspace tool tried locally found the workspace on another host (it did not act)."""
    err = root(err)
    return isinstance(err, ApplicationError) and err.type == ErrorType.NOT_ON_THIS_HOST


def needs_workspace(plan: RunPlan) -> bool:
    return any(spec.workspace for spec in plan.tools)


def host_name(queue: str | None) -> str:
    """`ratchet@host-a` -> `host-a`, for people."""
    return queue.rpartition("@")[2] if queue else "(none)"
