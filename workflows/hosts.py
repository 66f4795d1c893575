"""Where a run's workspace activities go, and how a lost host shows (deterministic, no I/O).

A run's workspace is a directory on one host (`AgentState.workspace_host`, that host's task queue).
Every activity that touches it (workspace tools, their undos, `checkpoint.verify`) is scheduled on
that queue with a schedule-to-start timeout of `RunPolicy.host_timeout_s`: a host that does not
take it in time is gone, and the run fails over (workflows/failover.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import TypedDict, TypeVar

from temporalio.exceptions import ActivityError, ApplicationError, TimeoutType
from temporalio.exceptions import TimeoutError as TemporalTimeout

from ratchet.contracts import AgentState, ErrorType, RunPlan
from .errors import root


T = TypeVar("T")


class HostOptions(TypedDict, total=False):
    """The activity options that put a workspace activity on its host's queue (`on_host`): a subset
    of `temporalio.workflow.ActivityConfig` that a call site adds to options of its own."""

    task_queue: str
    schedule_to_start_timeout: timedelta


class HostLost(Exception):
    """A workspace activity was not taken by the host holding the workspace within the plan's
    `host_timeout_s`: the host is gone. The loop fails the run over to another host."""

    def __init__(self, host: str | None, what: str) -> None:
        super().__init__(f"{what}: host {host} did not take it (schedule-to-start timeout)")
        self.host = host


async def on_workspace_host(
    state: AgentState,
    plan: RunPlan,
    schedule: Callable[[str | None, HostOptions], Awaitable[T]],
) -> T:
    """Run a workspace activity: `schedule(host, options)` schedules it with those activity options,
    told (`host`) which host queue it must run on, None where the options put it there already.

    Where the workspace was bound to the host of the workflow's worker (`plan.local_activities`:
    a local `workspace.open`), first on the run's own queue with `host` set: the worker that
    scheduled it takes it eagerly, with no poll of another queue. If another host's worker took it
    (the run moved, or no slot was free), it answered NotOnThisHost without acting: then on the
    host's queue, as always without a local binding."""
    host = state.workspace.host
    if host is not None and plan.local_activities:
        try:
            return await schedule(host, HostOptions())
        except ActivityError as err:
            if not elsewhere(err):
                raise
    return await schedule(None, on_host(host, plan))


def on_host(host: str | None, plan: RunPlan) -> HostOptions:
    """Activity options for a workspace activity on `host` (none without a host: the run's queue)."""
    if host is None:
        return HostOptions()
    return HostOptions(task_queue=host, schedule_to_start_timeout=timedelta(seconds=plan.host_timeout_s))


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
