"""A deploy guard's activities (workflows/deploy_guard.py): `deploy.route` changes its deployment's
routing, `deploy.evaluate` reads the two builds' finished runs and flags from visibility and judges
them (ratchet/contracts/guard.py).

What the evaluation can see is what visibility holds of a closed run: its status, its phase
(`RatchetPhase`), its cost (`RatchetCostUsd`), its agent and build, and the flags on it (`RatchetFlag`
markers, workflows/flags.py). A run's verifier results are in its state, which a closed run gives
only by replaying its history: too dear every interval for every run. So `verifier_pass` is read off
the phase: of the runs whose agent's profile (on this worker) has a verifier, those that ended DONE,
since under a verifier a run takes a final answer only when its workspace passes
(workflows/step.py). A run whose `AgentRun.verifier` overrides its profile's is judged by its profile.
Runs are those of the guard's task queue, so two deployments' builds of the same name do not mix.
"""

from __future__ import annotations

from temporalio import activity
from temporalio.client import Client, WorkflowExecution, WorkflowExecutionStatus
from temporalio.exceptions import ApplicationError

from ratchet.contracts import (
    AGENT_WORKFLOW,
    FLAG_WORKFLOW,
    BuildFigures,
    ErrorType,
    EvaluateGuard,
    Evaluation,
    Phase,
    Route,
    RunAttributes,
    flagged_run,
)
from ratchet.contracts.activities import DEPLOY_EVALUATE, DEPLOY_ROUTE
from ratchet.contracts.guard import judge
from ratchet.core.profiles import ProfileRegistry
from ratchet.core.search_keys import key
from ratchet.deploys import deployments
from ratchet.deploys.deployments import DeploymentError

PHASE = key(RunAttributes.PHASE)
AGENT = key(RunAttributes.AGENT)
COST = key(RunAttributes.COST)
FAILED_PHASES = {str(Phase.FAILED), str(Phase.COMPENSATION_FAILED)}
FAILED_STATUSES = {
    WorkflowExecutionStatus.FAILED,
    WorkflowExecutionStatus.TERMINATED,
    WorkflowExecutionStatus.TIMED_OUT,
}
MAX_LISTED = 20_000
"""Runs (or flags) of one build read per evaluation at most: a window that holds more is judged by
the most recent ones."""


class DeployActivities:
    def __init__(self, client: Client | None, profiles: ProfileRegistry) -> None:
        self.client = client
        self.profiles = profiles

    def _client(self) -> Client:
        assert self.client is not None, "the deploy guard's activities need a Temporal client"
        return self.client

    @activity.defn(name=DEPLOY_ROUTE.name)
    async def route(self, req: Route) -> str:
        """Ramp, end the ramp, or promote; done already (a retry after it took effect) is done, and
        so is a change made whose propagation to every task queue is slow (`settled` timed out: the
        server goes on with it). A refusal is not retried (`DeploymentRefused`, saying why)."""
        client = self._client()
        done = (
            f"{req.build} is current"
            if req.promote
            else (f"{req.build} ramping at {req.percentage:g}%" if req.build else "no ramp")
        )
        try:
            if await self._routed(req):
                return done
            if req.promote:
                assert req.build is not None
                await deployments.set_current(client, req.deployment, req.build)
            else:
                await deployments.set_ramping(client, req.deployment, req.build, req.percentage)
        except DeploymentError as exc:
            if await self._routed(req):
                return f"{done} (not yet on every task queue: {exc})"
            raise ApplicationError(str(exc), type=ErrorType.DEPLOYMENT_REFUSED, non_retryable=True) from None
        return done

    async def _routed(self, req: Route) -> bool:
        """Whether the deployment routes as `req` asks already."""
        found = await deployments.require(self._client(), req.deployment)
        if req.promote:
            return found.current == req.build and found.ramping is None
        return found.ramping == req.build and (req.build is None or found.ramp_percentage == req.percentage)

    @activity.defn(name=DEPLOY_EVALUATE.name)
    async def evaluate(self, req: EvaluateGuard) -> Evaluation:
        request = req.request
        baseline = request.baseline or ""
        ramped = await self.figures(req.task_queue, request.build, req.since)
        base = await self.figures(req.task_queue, baseline, req.baseline_since)
        results, verdict, reason = judge(req.criteria, ramped, base, request.min_runs)
        found = await deployments.describe(self._client(), request.deployment)
        current, ramping = (found.current, found.ramping) if found is not None else (None, None)
        pct = found.ramp_percentage if found is not None else 0.0
        routing = f"current {current}, ramping {ramping or 'none'}" + (f" at {pct:g}%" if ramping else "")
        expected = (baseline, request.build, req.percentage)
        return Evaluation(
            at=req.at,
            since=req.since,
            ramped=ramped,
            baseline=base,
            results=results,
            verdict=verdict,
            reason=reason,
            routing=routing,
            routing_changed=(current, ramping, pct) != expected,
        )

    async def figures(self, task_queue: str, build: str, since: str) -> BuildFigures:
        """A build's finished runs on `task_queue` that closed since `since`, and its flags since then."""
        figures = BuildFigures(build=build)
        scope = f'TaskQueue="{task_queue}" AND {RunAttributes.BUILD}="{build}"'
        runs = (
            f'WorkflowType="{AGENT_WORKFLOW}" AND {scope} AND CloseTime >= "{since}" '
            'AND ExecutionStatus != "Running" AND ExecutionStatus != "ContinuedAsNew"'
        )
        async for run in self._client().list_workflows(runs, limit=MAX_LISTED):
            self._count(figures, run)
        flags = f'WorkflowType="{FLAG_WORKFLOW}" AND {scope} AND StartTime >= "{since}"'
        flagged = {flagged_run(flag.id) async for flag in self._client().list_workflows(flags, limit=MAX_LISTED)}
        figures.flagged = len(flagged)
        return figures

    def _count(self, figures: BuildFigures, run: WorkflowExecution) -> None:
        attributes = run.typed_search_attributes
        phase = attributes.get(PHASE)
        figures.runs += 1
        figures.failed += phase in FAILED_PHASES or run.status in FAILED_STATUSES
        figures.budget_exhausted += phase == Phase.BUDGET_EXHAUSTED
        figures.cost_usd += attributes.get(COST) or 0.0
        profile = self.profiles.get(attributes.get(AGENT) or "")
        if profile is not None and profile.verifier is not None:
            figures.verifier_runs += 1
            figures.verifier_passed += phase == Phase.DONE

    def all(self) -> list:
        return [self.route, self.evaluate]
