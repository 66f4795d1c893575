"""A ramp that watches itself (issue #39, item 4): two builds of one Worker Deployment on the dev
server, the guard (`DeployGuardWorkflow`) started through ratchet/deploys/guarding.py as the CLI
does. A broken build is rolled back on its first failures, a healthy one promoted step by step, a
person's flag counts as a bad outcome, bad requests change nothing, and the guard goes on after its
worker restarts. The builds are this code
under two build ids; `probe_release` (tests/plugins/probe.py) fails on the builds a run names, as a
bad release would."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from temporalio.common import PinnedVersioningOverride, WorkerDeploymentVersion

from ratchet.client import RunFailed, RunHandle
from ratchet.contracts import (
    GUARD_WORKFLOW,
    GuardDecision,
    GuardInput,
    GuardPhase,
    GuardRequest,
    GuardStatus,
    Phase,
    guard_id,
)
from ratchet.deploys import deployments, guarding
from ratchet.deploys.deployments import DeploymentError
from ratchet.deploys.guarding import flag, guard_status, start_guard, stop_guard
from ratchet.worker.main import build_worker
from tests.runs import call, scripted, start, until

FAST = {"interval_s": 0.5, "window_s": 30.0}


def build(settings, deployment: str, build_id: str, promote: str = "never"):
    return settings.model_copy(update={"deployment": deployment, "build_id": build_id, "promote": promote})


def release(broken_on: list[str]) -> dict:
    return scripted("releaser", [{"tool_calls": [call("probe_release", broken_on=broken_on)]}, {"content": "released"}])


@pytest.fixture
def deployment() -> str:
    return f"guard-{uuid.uuid4().hex[:10]}"


@contextlib.asynccontextmanager
async def two_builds(client, settings, deployment: str) -> AsyncIterator[tuple]:
    """v1 current, v2 registered beside it (no ramp yet)."""
    v1, v2 = build(settings, deployment, "v1", promote="first"), build(settings, deployment, "v2")
    async with build_worker(client, v1, graceful_shutdown_timeout=timedelta(0)):
        await until(lambda: routing(client, deployment, current="v1"), "v1 current")
        async with build_worker(client, v2, graceful_shutdown_timeout=timedelta(0)):
            await until(lambda: polls(client, deployment, "v2", v2.task_queue), "v2 polls the task queue")
            yield v1, v2


async def routing(client, deployment: str, current: str | None = None, knows: str | None = None, ramping=None):
    await asyncio.sleep(0.2)  # the server limits requests per deployment
    found = await deployments.describe(client, deployment)
    if found is None or (current is not None and found.current != current):
        return None
    if ramping is not None and found.ramping != ramping:
        return None
    return found if knows is None or found.version(knows) is not None else None


async def polls(client, deployment: str, build_id: str, task_queue: str) -> bool:
    await asyncio.sleep(0.2)
    found = await deployments.describe(client, deployment)
    if found is None or found.version(build_id) is None:
        return False
    return task_queue in await deployments.task_queues(client, deployment, build_id)


async def ended(client, deployment: str, timeout: float = 120) -> GuardStatus:
    async def done() -> GuardStatus | None:
        status = await guard_status(client, deployment)
        return status if status is not None and status.ended else None

    return await until(done, f"the guard of {deployment} ended", timeout)


@dataclass(frozen=True)
class Ended:
    phase: Phase
    builds: list[str]


@contextlib.asynccontextmanager
async def traffic(client, settings, run: dict) -> AsyncIterator[list[RunHandle]]:
    """Runs started one after another (each once the one before has ended) until the block ends."""
    started: list[RunHandle] = []

    async def keep_going() -> None:
        while True:
            started.append(await start(client, settings, run))
            with contextlib.suppress(RunFailed):
                await started[-1].result()

    task = asyncio.create_task(keep_going())
    try:
        yield started
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def outcomes(started: list[RunHandle]) -> list[Ended]:
    """How each run ended (a closed run's state: a worker of its build replays it)."""
    ended = []
    for run in started:
        with contextlib.suppress(RunFailed):
            await run.result()
        state = await run.state()
        ended.append(Ended(state.phase, state.release.builds))
    return ended


async def test_a_broken_build_at_a_50_percent_ramp_is_rolled_back_by_its_guard(client, settings, deployment):
    async with two_builds(client, settings, deployment) as (v1, _):
        request = GuardRequest(
            deployment=deployment, build="v2", criteria="failure_rate<=0.2", steps=[50, 100], min_runs=3, **FAST
        )
        assert await start_guard(client, v1.task_queue, request) == f"ratchet-deploy-guard/{deployment}"
        ramp = await until(lambda: routing(client, deployment, ramping="v2"), "v2 ramping")
        assert (ramp.current, ramp.ramp_percentage) == ("v1", 50.0)
        async with traffic(client, v1, release(broken_on=["v2"])) as started:
            status = await ended(client, deployment)
        results = await outcomes(started)
        assert status.phase == GuardPhase.ROLLED_BACK and status.request.baseline == "v1"
        assert status.reason is not None and status.reason.startswith("failure_rate<=0.2 broken: ")
        assert [(d.action, d.percentage) for d in status.history] == [("ramp", 50.0), ("rollback", 0.0)]
        assert status.last is not None and status.last.ramped.failed >= 1
        failed = [r for r in results if r.builds == ["v2"]]
        assert failed and all(r.phase == Phase.FAILED for r in failed)
        assert all(r.phase == Phase.DONE for r in results if r.builds == ["v1"])
        after = await deployments.describe(client, deployment)
        assert after is not None and (after.current, after.ramping) == ("v1", None)
        fresh = await start(client, v1, release(broken_on=["v2"]))
        assert (await fresh.result()).builds == ["v1"]  # new runs go to v1 only


async def test_a_healthy_build_is_promoted_step_by_step(client, settings, deployment):
    async with two_builds(client, settings, deployment) as (v1, _):
        request = GuardRequest(
            deployment=deployment,
            build="v2",
            criteria="failure_rate<=0.1, budget_exhausted<=0.1, cost_per_run<=1.5x, flagged<=0.1",
            steps=[50, 100],
            min_runs=2,
            interval_s=0.5,
            window_s=2.0,
        )
        await start_guard(client, v1.task_queue, request)
        async with traffic(client, v1, release(broken_on=[])) as started:
            status = await ended(client, deployment)
        results = await outcomes(started)
        assert status.phase == GuardPhase.PROMOTED, status.reason
        assert [(d.action, d.percentage) for d in status.history] == [
            ("ramp", 50.0),
            ("ramp", 100.0),
            ("promote", 100.0),
        ]
        assert status.last is not None and status.last.ramped.runs >= 2 and status.last.ramped.failed == 0
        assert all(r.phase == Phase.DONE for r in results) and ["v2"] in [r.builds for r in results]
        after = await deployments.describe(client, deployment)
        assert after is not None and (after.current, after.ramping) == ("v2", None)


async def test_a_flagged_run_counts_against_its_build(client, settings, deployment):
    async with two_builds(client, settings, deployment) as (v1, _):
        request = GuardRequest(
            deployment=deployment, build="v2", criteria="flagged<=0.1", steps=[100], min_runs=5, **FAST
        )
        await start_guard(client, v1.task_queue, request)
        await until(lambda: routing(client, deployment, ramping="v2"), "v2 ramping")
        run = await start(client, v1, release(broken_on=[]))
        result = await run.result()
        assert result.phase == Phase.DONE and result.builds == ["v2"]  # a good run by its phase
        first = await flag(client, v1.task_queue, run.workflow_id, "wrong answer", by="ana")
        assert await flag(client, v1.task_queue, run.workflow_id, " wrong answer ", by="ana") == first  # one flag
        status = await ended(client, deployment)
        assert status.phase == GuardPhase.ROLLED_BACK
        assert status.reason is not None and status.reason.startswith("flagged<=0.1 broken: ")
        assert status.last is not None and status.last.ramped.flagged == 1 and status.last.ramped.failed == 0
        with pytest.raises(DeploymentError, match="no run 'nope-"):
            await flag(client, v1.task_queue, f"nope-{uuid.uuid4().hex[:6]}", "wrong", by=None)


async def test_bad_guard_requests_are_refused_and_change_nothing(client, settings, deployment):
    async with two_builds(client, settings, deployment) as (v1, _):
        good = GuardRequest(deployment=deployment, build="v2", criteria="failure_rate<=0.1", **FAST)
        refusals = [
            (good.model_copy(update={"criteria": "failure_rate<=0.1, fail_rate<=0.2"}), "unknown guard term 'fail_"),
            (good.model_copy(update={"criteria": "failure_rate=<0.1"}), "'failure_rate=<0.1' does not parse"),
            (good.model_copy(update={"steps": [10, 140]}), "ramp percentage 140 is outside 0-100"),
            (good.model_copy(update={"build": "v9"}), "build 'v9' is unknown to deployment .* no worker of it"),
            (good.model_copy(update={"build": "v1"}), "build 'v1' is current in .* already"),
        ]
        for request, says in refusals:
            with pytest.raises(DeploymentError, match=says):
                await start_guard(client, v1.task_queue, request)
        assert await guard_status(client, deployment) is None  # no guard was started
        found = await deployments.describe(client, deployment)
        assert found is not None and (found.current, found.ramping) == ("v1", None)

        await start_guard(client, v1.task_queue, good.model_copy(update={"steps": [10, 50], "min_runs": 100}))
        with pytest.raises(DeploymentError, match="a guard already watches deployment"):
            await start_guard(client, v1.task_queue, good)
        await stop_guard(client, deployment)
        status = await guard_status(client, deployment)
        assert status is not None and status.phase == GuardPhase.STOPPED and status.reason == "stopped by a person"
        found = await deployments.describe(client, deployment)  # a stop leaves the routing as it was
        assert found is not None and (found.current, found.ramping, found.ramp_percentage) == ("v1", "v2", 10.0)
        with pytest.raises(DeploymentError, match="no guard runs for deployment"):
            await stop_guard(client, deployment)


async def test_the_guard_goes_on_after_its_worker_restarts(client, settings, deployment, monkeypatch):
    """The guard is a workflow: its timer and its ramp outlive the worker of its (baseline) build,
    and a new worker of that build takes it up where it was."""
    v1, v2 = build(settings, deployment, "v1", promote="first"), build(settings, deployment, "v2")
    async with build_worker(client, v2, graceful_shutdown_timeout=timedelta(0)):
        async with build_worker(client, v1, graceful_shutdown_timeout=timedelta(0)):
            await until(lambda: routing(client, deployment, current="v1"), "v1 current")
            await until(lambda: polls(client, deployment, "v2", v2.task_queue), "v2 polls the task queue")
            request = GuardRequest(
                deployment=deployment, build="v2", criteria="failure_rate<=0.2", steps=[100], min_runs=3, **FAST
            )
            await start_guard(client, v1.task_queue, request)
            await until(lambda: routing(client, deployment, ramping="v2"), "v2 ramping")
        # v1's worker is gone: the guard waits; v2 takes every new run meanwhile
        broken = await start(client, v2, release(broken_on=["v2"]))
        with pytest.raises(RunFailed):
            await broken.result()
        with monkeypatch.context() as patched:
            patched.setattr(guarding, "QUERY_TIMEOUT_S", 1.0)
            with pytest.raises(DeploymentError, match="did not answer in 1s: is a worker of its build"):
                await guard_status(client, deployment)
        # the restarted worker's first answer may take longer than 1s on a loaded machine
        async with build_worker(client, v1, graceful_shutdown_timeout=timedelta(0)):
            status = await ended(client, deployment)
            assert status.phase == GuardPhase.ROLLED_BACK and status.last is not None
            assert status.last.ramped.failed == 1
            after = await deployments.describe(client, deployment)
            assert after is not None and (after.current, after.ramping) == ("v1", None)


async def test_a_guard_continued_as_new_goes_on_from_its_carried_status(client, settings, deployment):
    """What a continue-as-new hands over (`GuardInput.carried`): the next run does not ramp again, it
    goes on from the step it was at, its decisions so far kept. (A long guard continues as new when
    Temporal suggests it; its pinned version is inherited.)"""
    async with two_builds(client, settings, deployment) as (v1, _):
        request = GuardRequest(
            deployment=deployment,
            build="v2",
            baseline="v1",
            criteria="failure_rate<=0.1",
            steps=[50, 100],
            min_runs=2,
            interval_s=0.5,
            window_s=2.0,
        )
        await deployments.set_ramping(client, deployment, "v2", 50)
        at = datetime.now(UTC).isoformat()
        ramped = GuardDecision(at=at, action="ramp", percentage=50.0, reason="ramp v2 to 50% of new runs")
        carried = GuardStatus(
            request=request, percentage=50.0, started_at=at, step_started_at=at, evaluations=7, history=[ramped]
        )
        await client.start_workflow(
            GUARD_WORKFLOW,
            GuardInput(request=request, carried=carried),
            id=guard_id(deployment),
            task_queue=v1.task_queue,
            versioning_override=PinnedVersioningOverride(WorkerDeploymentVersion(deployment, "v1")),
        )
        async with traffic(client, v1, release(broken_on=[])):
            status = await ended(client, deployment)
        assert status.phase == GuardPhase.PROMOTED and status.evaluations > 7
        assert [(d.action, d.percentage) for d in status.history] == [
            ("ramp", 50.0),
            ("ramp", 100.0),
            ("promote", 100.0),
        ]
        assert status.history[0] == ramped
