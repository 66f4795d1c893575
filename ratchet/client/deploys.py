"""Deploying a new build to running agents, from the client (`RatchetClient.deploys`): what each
build of the worker deployment runs (`status`), whether a candidate build can take over the runs
that would move to it (`check`), and the routing verbs (`ramp`, `promote`, `rollback`), each over
ratchet/deploys/deployments.py, the one module that calls Temporal's worker-deployment RPCs.

The plain Temporal CLI does the routing the same way (docs/OPERATIONS.md, "Deploying a new
version"): `temporal worker deployment describe --name D`, `set-current-version`,
`set-ramping-version`; what it cannot do is count a build's runs by outcome, check a candidate
against the runs that would move to it, or roll the runs of a bad build back and rerun them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from pydantic import ValidationError
from temporalio.client import Client, WorkflowHistory
from temporalio.service import RPCError

from ratchet.client.deploy_reports import (
    Candidate,
    CheckProblem,
    DeployCheck,
    DeployRollback,
    DeployStatus,
    Routed,
    RunLike,
)
from ratchet.client.deploy_runs import DeploymentRuns
from ratchet.client.errors import InvalidInput, RatchetError, Refused, RunNotFound, rpc_error
from ratchet.contracts import GuardPhase, GuardRequest, GuardStatus, RunMessages
from ratchet.contracts.guard import parse_criteria
from ratchet.deploys import deployments, guarding
from ratchet.deploys.deployments import Deployment, DeploymentError
from ratchet.ops.settings import Settings

T = TypeVar("T")
DEFAULT_STEPS = (10.0, 50.0, 100.0)
"""A guarded ramp's steps after its first (`ramp --steps`)."""


class Deploys:
    """The worker deployment `settings.deployment_name` on the Temporal service `temporal`; `get` gives
    a run's handle (`RatchetClient.get`)."""

    def __init__(self, temporal: Client, settings: Settings, get: Callable[[str], RunLike]) -> None:
        self.temporal, self.settings, self.get = temporal, settings, get
        self.deployment = settings.deployment_name
        self.runs = DeploymentRuns(temporal, self.deployment, get)

    @property
    def address(self) -> str:
        return self.temporal.service_client.config.target_host

    async def status(self) -> DeployStatus:
        """Every build: current, ramping at what percentage, its open runs, drained or not, its
        closed runs by phase; and the ramp guard's state if one ran."""
        found = await self._require()
        versions = await asyncio.gather(*(self.runs.version(found, v) for v in found.versions))
        guard, problem = await self._guard()
        return DeployStatus(
            deployment=found.name,
            current=found.current,
            ramping=found.ramping,
            ramp_percentage=found.ramp_percentage,
            previous=found.previous,
            versions=list(versions),
            guard=guard,
            guard_problem=problem,
        )

    async def ramp(
        self,
        build: str,
        percentage: float,
        guard: str | None = None,
        window_s: float = 1800.0,
        steps: Sequence[float] | None = None,
        interval_s: float | None = None,
        min_runs: int | None = None,
    ) -> Routed:
        """Send `percentage` of new runs (and of sessions reaching a turn boundary) to `build`.
        Refused for an unknown build, the current one, or one no worker polls. With `guard`
        (criteria: `failure_rate<=0.05, cost_per_run<=1.2x, ...`), a guard workflow takes the ramp
        from `percentage` through the `steps` above it (default 10, 50, 100) while the criteria
        hold over each `window_s`, promotes after the last, and rolls back the moment one breaks
        (ratchet/deploys/guarding.py). Without one, refused while a guard ramps."""
        if not 0 <= percentage <= 100:
            raise InvalidInput("ramp", [f"percentage: {percentage:g} is outside 0-100"])
        if guard is not None:
            return await self._guarded(build, percentage, guard, window_s, steps, interval_s, min_runs)
        found = await self._require(build)
        if found.current == build:
            raise Refused("ramp", f"build {build!r} is current in {self.deployment!r} already: nothing to ramp")
        running, _ = await self._guard()
        if running is not None and not running.ended:
            raise Refused(
                "ramp",
                f"a guard ramps {running.request.build!r} in {self.deployment!r}: `deploy promote` or "
                "`deploy rollback` ends it first",
            )
        await self._routing(deployments.require_polled(self.temporal, self.deployment, build))
        await self._routing(deployments.set_ramping(self.temporal, self.deployment, build, percentage))
        return Routed(
            deployment=self.deployment,
            current=found.current,
            ramping=build,
            ramp_percentage=percentage,
            previous=found.ramping if found.ramping != build else None,
            sessions_told=await self.runs.move_idle_sessions(),
        )

    async def _guarded(
        self,
        build: str,
        percentage: float,
        criteria: str,
        window_s: float,
        steps: Sequence[float] | None,
        interval_s: float | None,
        min_runs: int | None,
    ) -> Routed:
        try:
            parse_criteria(criteria)
        except ValueError as exc:
            raise InvalidInput("ramp", [f"guard: {exc}"]) from None
        later = [s for s in (steps if steps is not None else DEFAULT_STEPS) if s > percentage]
        fields: dict[str, Any] = {"window_s": window_s, "steps": [percentage, *later]}
        fields.update({k: v for k, v in (("interval_s", interval_s), ("min_runs", min_runs)) if v is not None})
        try:
            request = GuardRequest(deployment=self.deployment, build=build, criteria=criteria, **fields)
        except ValidationError as exc:
            raise InvalidInput.of("ramp", exc) from None
        found = await self._require(build)
        await self._routing(deployments.require_polled(self.temporal, self.deployment, build))
        started = await self._routing(guarding.start_guard(self.temporal, self.settings.task_queue, request))
        return Routed(
            deployment=self.deployment, current=found.current, ramping=build, ramp_percentage=percentage, guard=started
        )

    async def promote(self, build: str) -> Routed:
        """Make `build` current: new runs start on it, sessions move to it at their next turn
        boundary, runs pinned to the build before finish there. A ramp of it ends."""
        found = await self._require(build)
        if found.current != build:
            await self._routing(deployments.require_polled(self.temporal, self.deployment, build))
        stopped = await self._stop_guard()
        previous = await self._routing(deployments.set_current(self.temporal, self.deployment, build))
        told = await self.runs.move_idle_sessions()
        return Routed(
            deployment=self.deployment, current=build, previous=previous, guard_stopped=stopped, sessions_told=told
        )

    async def rollback(self, rerun: bool = False) -> DeployRollback:
        """The build that was current before becomes current again; during a ramp, the ramp ends
        (the current build stays). The bad build's runs finish where they are, or, with `rerun`,
        each open one is rolled back to its last checkpoint (or its start) and reruns from there on
        the restored build, each effect undone or redone once (`RunHandle.rollback(..., then="rerun")`).
        Once the ramp guard has rolled its build back (the ramp ended, its baseline still current),
        the routing is left as it is: with `rerun` that build's open runs are rerun, without it the
        rollback is refused (the build before the current one is not what went wrong)."""
        found = await self._require()
        stopped = await self._stop_guard()
        found = await self._require() if stopped else found  # the guard may have moved the routing meanwhile
        guarded = await self._rolled_back_by_guard(found)
        if found.ramping is not None:
            bad, restored, ended_ramp = found.ramping, found.current, True
            await self._routing(deployments.set_ramping(self.temporal, self.deployment, None, 0))
        elif found.current is not None and guarded is not None:
            if not rerun:
                raise Refused(
                    "deploy rollback",
                    f"the ramp guard rolled build {guarded!r} back already ({found.current!r} is current): "
                    f"nothing to roll back; --rerun reruns its open runs on {found.current!r}",
                )
            bad, restored, ended_ramp = guarded, found.current, False
        else:
            previous = found.previous
            if found.current is None or previous is None:
                raise Refused(
                    "deploy rollback",
                    f"deployment {self.deployment!r} has no earlier version to go back to "
                    f"(current: {found.current or 'none'}; builds: {', '.join(found.build_ids) or 'none'})",
                )
            await self._routing(deployments.require_polled(self.temporal, self.deployment, previous))
            bad, restored, ended_ramp = found.current, previous, False
            await self._routing(deployments.set_current(self.temporal, self.deployment, previous))
        reruns = await self.runs.rerun_all(bad) if rerun else []
        told = await self.runs.move_idle_sessions()
        return DeployRollback(
            sessions_told=told,
            deployment=self.deployment,
            current=restored,
            previous=bad,
            bad=bad,
            ended_ramp=ended_ramp,
            reruns=reruns,
            guard_stopped=stopped,
        )

    async def check(self, build: str, candidate: Candidate) -> DeployCheck:
        """Whether `build` (the `candidate` code installed here) can take over the open runs that
        would move to it: the recorded corpus and those runs' histories replay on it, and each such
        session's state reads as its state and continuation, every tool its plan names there.
        Refused outright when the code here is not `build`. A check that finds problems lists them
        (`DeployCheck.problems`): the caller refuses the deploy."""
        if candidate.build_id != build:
            raise Refused(
                "deploy check",
                f"the code here is build {candidate.build_id!r}, not {build!r}: run the check where build "
                f"{build!r} is installed (or with RATCHET_BUILD_ID={build} if this code is that build)",
            )
        moving = await self.runs.moving(build)
        problems: list[CheckProblem] = []
        histories: list[WorkflowHistory] = []
        for run in moving:
            calls = self.runs.calls(run.workflow_id)
            try:
                raw = await calls.query(RunMessages.STATE, result_type=dict, what="state")
                histories.append(await calls.ask("history", calls.handle.fetch_history()))
            except RatchetError as exc:
                problems.append(CheckProblem(workflow_id=run.workflow_id, source="run", what=f"cannot read it: {exc}"))
                continue
            if raw is not None:
                problems += candidate.unreadable(run.workflow_id, raw)
        corpus, diverged = await candidate.replay(histories)
        return DeployCheck(
            build=build, corpus=corpus, runs=[r.workflow_id for r in moving], problems=problems + diverged
        )

    async def _require(self, build: str | None = None) -> Deployment:
        """The deployment (InvalidInput for an unknown build, naming the builds it has)."""
        found = await self._routing(deployments.describe(self.temporal, self.deployment))
        if found is None:
            raise Refused(
                "deploy",
                f"no worker deployment {self.deployment!r}: no worker of it has polled yet "
                "(start one; RATCHET_DEPLOYMENT names the deployment)",
            )
        if build is not None and found.version(build) is None:
            raise InvalidInput(
                "deploy",
                [f"build: {build!r} is unknown to {self.deployment!r} (builds: {', '.join(found.build_ids)})"],
            )
        return found

    async def _routing(self, call: Awaitable[T]) -> T:
        """A deployment RPC: DeploymentError as Refused (nothing changed), RPCError translated."""
        try:
            return await call
        except DeploymentError as exc:
            raise Refused("deploy", str(exc)) from None
        except RPCError as exc:
            raise rpc_error(f"deployment {self.deployment!r}", exc, self.address) from None

    async def flag(self, workflow_id: str, reason: str, by: str | None = None) -> str:
        """Mark run `workflow_id`'s outcome bad (running or closed), for the ramp guard, which counts
        flagged runs of the ramped build (`flagged<=0.05`); the same flag twice is one. Returns the
        flag's workflow id. `by`: who flags (default: this client's identity)."""
        if not reason.strip():
            raise InvalidInput("flag", ["reason: say what was wrong with the run"])
        try:
            return await guarding.flag(
                self.temporal, self.settings.task_queue, workflow_id, reason, by or self.temporal.identity
            )
        except DeploymentError as exc:
            if str(exc).startswith("no run "):
                raise RunNotFound(workflow_id) from None
            raise Refused("flag", str(exc)) from None
        except RPCError as exc:
            raise rpc_error(f"cannot flag {workflow_id}", exc, self.address) from None

    async def _guard(self) -> tuple[GuardStatus | None, str | None]:
        """The guard's state, or why it cannot be read."""
        try:
            return await guarding.guard_status(self.temporal, self.deployment), None
        except DeploymentError as exc:
            return None, str(exc)
        except RPCError as exc:
            raise rpc_error("cannot read the guard", exc, self.address) from None

    async def _rolled_back_by_guard(self, found: Deployment) -> str | None:
        """The build the last guard rolled back, if its baseline is current and nothing ramps."""
        guard, _ = await self._guard()
        if guard is None or guard.phase != GuardPhase.ROLLED_BACK or found.ramping is not None:
            return None
        return guard.request.build if guard.request.baseline == found.current else None

    async def _stop_guard(self) -> bool:
        """End a running guard (a person routes by hand now); whether one ran."""
        running, _ = await self._guard()
        if running is None or running.ended:
            return False
        try:
            await guarding.stop_guard(self.temporal, self.deployment)
        except DeploymentError:  # it ended meanwhile
            return False
        except RPCError as exc:
            raise rpc_error("cannot stop the guard", exc, self.address) from None
        return True
