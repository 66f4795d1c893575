"""Scheduling Ratchet's declared activities (ratchet/contracts/activities.py): one typed helper,
so a call site names the activity's definition and what differs from its defaults, never a
string or a copy of a retry policy (deterministic, no I/O)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Protocol, TypeVar, runtime_checkable

from temporalio import workflow
from temporalio.common import Priority, RetryPolicy

from ratchet.contracts import TaskPriority
from ratchet.contracts.activities import ActivityDef, Retry

I = TypeVar("I")
R = TypeVar("R")


def retry_policy(retry: Retry) -> RetryPolicy:
    return RetryPolicy(
        initial_interval=timedelta(seconds=retry.initial_s),
        maximum_interval=timedelta(seconds=retry.maximum_s) if retry.maximum_s is not None else None,
        maximum_attempts=retry.maximum_attempts,
    )


@runtime_checkable
class Prioritised(Protocol):
    """A workflow whose tasks carry a priority of their own (AgentWorkflow: the run's tenant and
    priority, ratchet/contracts/tenancy.py)."""

    def task_priority(self, model_path: bool) -> TaskPriority | None: ...


def priority(model_path: bool = False) -> Priority:
    """The priority of a task the current workflow schedules: its own (`Prioritised`), else the
    default (every field inherited from the workflow's)."""
    owner = workflow.instance()
    task = owner.task_priority(model_path) if isinstance(owner, Prioritised) else None
    if task is None:
        return Priority.default
    return Priority(
        priority_key=task.priority_key, fairness_key=task.fairness_key, fairness_weight=task.fairness_weight
    )


async def call(
    activity: ActivityDef[I, R],
    arg: I,
    *,
    summary: str,
    local: bool = False,
    start_to_close_s: float | None = None,
    retry: Retry | None = None,
    **options: Any,
) -> R:
    """Run `activity` on `arg` with its declared options, `start_to_close_s` and `retry` replacing
    them where given, `options` added (`task_queue`, `schedule_to_start_timeout`, ...). `local`:
    as a local activity (no heartbeat: it runs in the worker holding the workflow task). A regular
    activity carries the run's task priority (`priority`)."""
    timeout = timedelta(seconds=start_to_close_s if start_to_close_s is not None else activity.start_to_close_s)
    policy = retry_policy(retry if retry is not None else activity.retry)
    if local:
        return await workflow.execute_local_activity(
            activity.name,
            arg,
            result_type=activity.result,
            start_to_close_timeout=timeout,
            retry_policy=policy,
            summary=summary,
            **options,
        )
    if activity.heartbeat_s is not None:
        options.setdefault("heartbeat_timeout", timedelta(seconds=activity.heartbeat_s))
    options.setdefault("priority", priority(activity.model_path))
    return await workflow.execute_activity(
        activity.name,
        arg,
        result_type=activity.result,
        start_to_close_timeout=timeout,
        retry_policy=policy,
        summary=summary,
        **options,
    )
