"""Helpers for tests that drive agent runs, all through `ratchet.client`: start a scripted run,
wait until its state or its history shows something (never a fixed sleep), read its activities;
and the two command lines a user drives runs with, `ratchet` and `temporal`, as subprocesses."""

from __future__ import annotations

import asyncio
import inspect
import os
import sys
from collections.abc import Callable
from typing import Any

from temporalio.client import Client

from devtools.devserver import temporal_binary
from ratchet.client import NotStartedYet, RatchetClient, RunHandle, RunNotFound
from ratchet.contracts import AgentState
from ratchet.ops.settings import Settings


def scripted(agent: str, script: list[dict], objective: str = "do the task", **extra: Any) -> dict:
    return {"agent": agent, "objective": objective, "model": {"provider": "scripted", "options": {"script": script}}, **extra}


def call(name: str, **arguments) -> dict:
    """One tool call of a scripted model turn."""
    return {"name": name, "arguments": arguments}


def runs(client: Client, settings: Settings) -> RatchetClient:
    """The test's `ratchet.client` over its Temporal client, on its task queue."""
    return RatchetClient(client, settings)


async def start(
    client: Client, settings: Settings, run: dict, workflow_id: str | None = None, new_run: bool = False
) -> RunHandle:
    return await runs(client, settings).start(run, workflow_id, new_run=new_run)


async def wait_for(run: RunHandle, predicate: Callable[[AgentState], Any], timeout: float = 30) -> AgentState:
    """The run's state once `predicate` holds of it and the run has no workflow task pending (so the
    state is the one its history holds: a query answers from the worker's copy, which can be ahead
    of a task the server has not taken yet, and an update sent then is validated on the retried task
    before the activity result that led to the state); fails if the run ends first or `timeout`
    passes. A run that is not there yet (a child about to be started) is waited for too."""
    state = None
    try:
        async with asyncio.timeout(timeout):
            while True:
                try:
                    state = await run.state()
                except (NotStartedYet, RunNotFound):
                    state = None
                if state is not None:
                    if predicate(state) and not await _task_pending(run):
                        return state
                    assert not state.phase.terminal, f"run ended first: {state.phase} {state.last_error}"
                await asyncio.sleep(0.05)
    except TimeoutError:
        last = "no state yet" if state is None else f"{state.phase} at step {state.step}, last error {state.last_error}"
        raise AssertionError(f"{run.workflow_id}: not seen in {timeout} s; {last}{await _task_failing(run)}") from None


async def _task_pending(run: RunHandle) -> bool:
    return (await run.describe()).raw_description.HasField("pending_workflow_task")


async def _task_failing(run: RunHandle) -> str:
    """What a timed-out wait should say besides the state: a workflow task the worker keeps failing
    (the state a query shows is then the last good one)."""
    try:
        pending = (await run.describe()).raw_description.pending_workflow_task
    except Exception as exc:  # noqa: BLE001 - only a diagnosis
        return f"; describe failed: {exc}"
    return f"; workflow task pending, attempt {pending.attempt}" if pending.attempt > 1 else ""


async def wait_for_running_activity(run: RunHandle, activity_type: str, timeout: float = 30) -> None:
    """Wait until a worker has started an activity of this type (history records the start only
    when the activity ends, so ask for the pending activities)."""
    from temporalio.api.enums.v1 import PendingActivityState

    try:
        async with asyncio.timeout(timeout):
            while True:
                for pending in (await run.describe()).raw_description.pending_activities:
                    if (
                        pending.activity_type.name == activity_type
                        and pending.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED
                    ):
                        return
                await asyncio.sleep(0.05)
    except TimeoutError:
        raise AssertionError(f"{run.workflow_id}: {activity_type} never started in {timeout} s") from None


async def activity_attempts(run: RunHandle, activity_type: str) -> list[int]:
    """Attempt numbers of each started activity of a type, from the history."""
    history = await run.history()
    scheduled: dict[int, str] = {}
    attempts = []
    for event in history.events:
        if event.HasField("activity_task_scheduled_event_attributes"):
            scheduled[event.event_id] = event.activity_task_scheduled_event_attributes.activity_type.name
        if event.HasField("activity_task_started_event_attributes"):
            attrs = event.activity_task_started_event_attributes
            if scheduled.get(attrs.scheduled_event_id) == activity_type:
                attempts.append(attrs.attempt)
    return attempts


async def until(condition: Callable[[], Any], what: str, timeout: float = 30) -> Any:
    """`condition()`'s value (awaited if it is a coroutine) once it is true: a file written, a
    request received, a run listed, what no run state shows. Fails naming `what` after `timeout` s."""
    try:
        async with asyncio.timeout(timeout):
            while True:
                value = condition()
                if inspect.isawaitable(value):
                    value = await value
                if value:
                    return value
                await asyncio.sleep(0.05)
    except TimeoutError:
        raise AssertionError(f"not seen in {timeout} s: {what}") from None


async def ratchet(settings: Settings, *args: str, extra_env: dict[str, str] | None = None) -> tuple[int, str]:
    """`ratchet ARGS` against the test's server, task queue and stores (its ledger, artifacts and
    workspaces, not the defaults under the repository's .ratchet/): its exit code and output."""
    env = dict(os.environ, TEMPORAL_ADDRESS=settings.temporal_address, RATCHET_TASK_QUEUE=settings.task_queue,
               RATCHET_LEDGER_PATH=str(settings.ledger_path), RATCHET_ARTIFACT_DIR=str(settings.artifact_dir),
               RATCHET_WORKSPACE_ROOT=str(settings.workspace_root))
    env.update(extra_env or {})
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "ratchet.cli.main", *args, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await proc.communicate()
    return proc.returncode, out.decode()


async def temporal_cli(address: str, *args: str) -> tuple[int, str]:
    """The `temporal` CLI against the dev server at `address`: its exit code and output."""
    proc = await asyncio.create_subprocess_exec(
        temporal_binary(), *args, "--address", address,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await proc.communicate()
    return proc.returncode, out.decode()
