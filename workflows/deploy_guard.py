"""DeployGuardWorkflow: a ramp that watches itself (deterministic, no I/O; docs/OPERATIONS.md,
"Deploying a new version").

    deploy.route     ramp the build to the first step's percentage
    every interval   deploy.evaluate: the ramped build's and the baseline's finished runs (and flags)
                     from visibility, judged against the criteria (ratchet/contracts/guard.py)
      broken         deploy.route: end the ramp (the baseline, still current, takes every new run
                     again); ROLLED_BACK, the broken criteria and their figures the reason
      held a window  the next step; after the last, deploy.route makes the build current (PROMOTED)
      someone else changed the routing, or a person sent `stop`: STOPPED, the routing left as is

A workflow, so its timers and decisions survive worker restarts; its id is `guard_id(deployment)`,
so one guard watches a deployment at a time. It is started pinned to the baseline build
(ratchet/deploys/guarding.py): the build that is known good runs the guard, and it never moves onto
the build it judges. Its status (`status` query) is also its result. A long guard continues as new
when Temporal suggests it, carrying its status (a pinned override is inherited by the new run).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from pydantic import ValidationError
from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import ActivityError

from ratchet.contracts import (
    GUARD_STATUS_QUERY,
    GUARD_STOP_SIGNAL,
    GUARD_WORKFLOW,
    BuildFigures,
    Criterion,
    EvaluateGuard,
    Evaluation,
    GuardDecision,
    GuardInput,
    GuardPhase,
    GuardStatus,
    Route,
    Verdict,
)
from ratchet.contracts.activities import DEPLOY_EVALUATE, DEPLOY_ROUTE
from ratchet.contracts.guard import parse_criteria, request_problems
from . import calls
from .errors import cause, raise_if_cancelled
from .input import decoded, invalid

EXAMPLE = '{"request": {"deployment": "ratchet", "build": "v2", "baseline": "v1", "criteria": "failure_rate<=0.05"}}'


def parse_guard(raw: RawValue | None) -> tuple[GuardInput, list[Criterion]]:
    """The input and its criteria; anything wrong is `InvalidInput` naming it."""
    value = decoded(raw, EXAMPLE, "guard")
    try:
        start = value if isinstance(value, GuardInput) else GuardInput.model_validate(value)
    except ValidationError as exc:
        raise invalid(f"guard input: {exc.errors()[0]['loc']}: {exc.errors()[0]['msg']}") from None
    request = start.request
    problems = request_problems(request) + ([] if request.baseline else ["baseline: the current build is required"])
    if problems:
        raise invalid("; ".join(problems))
    try:
        return start, parse_criteria(request.criteria)
    except ValueError as exc:
        raise invalid(str(exc)) from None


def _iso(moment: datetime) -> str:
    return moment.isoformat()


@workflow.defn(name=GUARD_WORKFLOW, sandboxed=False)  # outside the SDK's sandbox, as AgentWorkflow
class DeployGuardWorkflow:
    def __init__(self) -> None:
        self._status: GuardStatus | None = None
        self._stop: str | None = None

    @workflow.query(name=GUARD_STATUS_QUERY)
    def status(self) -> GuardStatus | None:
        return self._status

    @workflow.signal(name=GUARD_STOP_SIGNAL)
    def stop(self, reason: str | None = None) -> None:
        """End the guard and leave the routing as it is (a person takes over)."""
        self._stop = reason or "stopped by a person"

    @workflow.run
    async def run(self, raw: RawValue = None) -> GuardStatus:  # type: ignore[assignment]  # None: no input
        start, criteria = parse_guard(raw)
        request = start.request
        now = _iso(workflow.now())
        status = self._status = start.carried or GuardStatus(request=request, started_at=now, step_started_at=now)
        if start.carried is None:
            first = request.steps[0]
            await self._route(
                status,
                Route(deployment=request.deployment, build=request.build, percentage=first),
                "ramp",
                f"ramp {request.build} to {first:g}% of new runs",
            )
        while not status.ended:
            try:
                await workflow.wait_condition(lambda: self._stop is not None, timeout=request.interval_s)
            except TimeoutError:
                pass
            if self._stop is not None:
                self._end(status, GuardPhase.STOPPED, "stop", self._stop)
                break
            await self._evaluate(status, criteria)
            if not status.ended and workflow.info().is_continue_as_new_suggested():
                workflow.continue_as_new(GuardInput(request=request, carried=status))
        return status

    async def _evaluate(self, status: GuardStatus, criteria: list[Criterion]) -> None:
        request, now = status.request, workflow.now()
        since = max(now - timedelta(seconds=request.window_s), datetime.fromisoformat(status.started_at))
        ask = EvaluateGuard(
            request=request,
            criteria=criteria,
            task_queue=workflow.info().task_queue,
            since=_iso(since),
            baseline_since=status.started_at,
            at=_iso(now),
            percentage=status.percentage,
        )
        try:
            summary = f"evaluate {request.build} at {status.percentage:g}%"
            found = await calls.call(DEPLOY_EVALUATE, ask, summary=summary)
        except ActivityError as err:  # visibility unavailable: this evaluation is skipped, the next one tries
            raise_if_cancelled(err)
            found = Evaluation(
                at=ask.at,
                since=ask.since,
                ramped=BuildFigures(build=request.build),
                baseline=BuildFigures(build=request.baseline or ""),
                reason=f"evaluation failed: {cause(err)}",
            )
        status.evaluations += 1
        status.last = found
        if found.routing_changed:
            self._end(status, GuardPhase.STOPPED, "stop", f"the routing was changed by someone else: {found.routing}")
        elif found.verdict == Verdict.BROKEN:
            ended = Route(deployment=request.deployment, build=None)
            if await self._route(status, ended, "rollback", found.reason):
                self._end(status, GuardPhase.ROLLED_BACK, None, found.reason)
        elif found.verdict == Verdict.HOLDS and now >= datetime.fromisoformat(status.step_started_at) + timedelta(
            seconds=request.window_s
        ):
            await self._next_step(status, found.reason)

    async def _next_step(self, status: GuardStatus, reason: str) -> None:
        request = status.request
        held = f"held for {request.window_s:g}s at {status.percentage:g}%: {reason}"
        if status.step + 1 >= len(request.steps):
            promote = Route(deployment=request.deployment, build=request.build, promote=True)
            if await self._route(status, promote, "promote", held):
                self._end(status, GuardPhase.PROMOTED, None, f"{request.build} promoted: {held}")
            return
        pct = request.steps[status.step + 1]
        if await self._route(
            status,
            Route(deployment=request.deployment, build=request.build, percentage=pct),
            "ramp",
            f"ramp to {pct:g}%: {held}",
        ):
            status.step += 1

    async def _route(self, status: GuardStatus, route: Route, action: str, reason: str) -> bool:
        """Change the routing and record the decision; a refusal ends the guard FAILED (False)."""
        try:
            await calls.call(DEPLOY_ROUTE, route, summary=f"{action} {route.build or ''} {route.percentage:g}%")
        except ActivityError as err:
            raise_if_cancelled(err)
            self._end(status, GuardPhase.FAILED, "fail", f"{action} refused: {cause(err)}")
            return False
        now = _iso(workflow.now())
        if action == "ramp":
            status.percentage, status.step_started_at = route.percentage, now
        elif action == "promote":
            status.percentage = 100.0
        elif action == "rollback":
            status.percentage = 0.0
        status.history.append(GuardDecision(at=now, action=action, percentage=status.percentage, reason=reason))
        return True

    def _end(self, status: GuardStatus, phase: GuardPhase, action: str | None, reason: str) -> None:
        status.end(phase, reason)
        if action is not None:
            at = _iso(workflow.now())
            status.history.append(GuardDecision(at=at, action=action, percentage=status.percentage, reason=reason))
