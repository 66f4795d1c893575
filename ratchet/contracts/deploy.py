"""A ramp that watches itself (`DeployGuardWorkflow`, workflows/deploy_guard.py) and a person's flag
on a run's outcome (`RatchetFlag`, workflows/flags.py): what the client sends, what the guard's
activities take and return, and its status (the `status` query, `ratchet deploy status`).

The guard's criteria (`failure_rate<=0.05, cost_per_run<=1.2x`) are parsed and judged by
ratchet/contracts/guard.py (pure functions over these models, for the client, the workflow and its
activities alike).
"""

from __future__ import annotations

import hashlib
from enum import StrEnum

from pydantic import BaseModel, Field

GUARD_WORKFLOW = "DeployGuardWorkflow"
"""The guard's workflow type: `temporal workflow describe --workflow-id ratchet-deploy-guard/D`."""
FLAG_WORKFLOW = "RatchetFlag"
"""The workflow type of a flag on a run (a marker that completes at once: workflows/flags.py)."""
GUARD_STATUS_QUERY = "status"
GUARD_STOP_SIGNAL = "stop"
GUARD_ID_PREFIX = "ratchet-deploy-guard/"
FLAG_ID_PREFIX = "ratchet-flag/"


def guard_id(deployment: str) -> str:
    """One guard per deployment: its workflow id is `ratchet-deploy-guard/{deployment}`."""
    return f"{GUARD_ID_PREFIX}{deployment}"


def flag_id(run_id: str, reason: str) -> str:
    """`ratchet-flag/{run}/{digest of the reason}`: the same flag twice is one flag."""
    digest = hashlib.sha256(reason.strip().encode()).hexdigest()[:12]
    return f"{FLAG_ID_PREFIX}{run_id}/{digest}"


def flagged_run(flag_workflow_id: str) -> str:
    """The run a flag's workflow id names (`flag_id`'s inverse)."""
    return flag_workflow_id.removeprefix(FLAG_ID_PREFIX).rsplit("/", 1)[0]


class GuardRequest(BaseModel):
    """`ratchet deploy ramp BUILD 10 --guard "..." --window 30m --steps 10,50,100`."""

    deployment: str
    build: str
    """The build to ramp (a worker of it must poll)."""
    criteria: str
    """`failure_rate<=0.05, verifier_pass>=0.9, budget_exhausted<=0.1, cost_per_run<=1.2x, flagged<=0.05`:
    each `term op number`, `x` after the number = times the baseline build's figure (contracts/guard.py)."""
    window_s: float = 1800.0
    """Runs that closed within this many seconds (and since the guard started) are its evidence; a
    step is taken once the criteria held for a whole window at the step before."""
    steps: list[float] = Field(default_factory=lambda: [10.0, 50.0, 100.0])
    """Ramp percentages, rising, each in (0, 100]; after the last held a window the build is promoted."""
    interval_s: float = 30.0
    """How often the guard evaluates (a durable timer)."""
    min_runs: int = 20
    """Finished runs of the ramped build in the window before a criterion is judged (one that is
    broken whatever the missing runs turn out to be is judged at once: contracts/guard.py)."""
    baseline: str | None = None
    """The build compared with and restored on a rollback: the deployment's current build when the
    guard starts (`start_guard` fills it in)."""


class Term(StrEnum):
    FAILURE_RATE = "failure_rate"
    """Failed runs (phase FAILED or COMPENSATION_FAILED, or closed as failed, terminated or timed
    out) over finished runs."""
    VERIFIER_PASS = "verifier_pass"
    """Of the finished runs whose agent runs a verifier, those that ended DONE (under a verifier a
    run ends DONE only when its workspace passes it)."""
    BUDGET_EXHAUSTED = "budget_exhausted"
    """Runs that ended BUDGET_EXHAUSTED over finished runs."""
    COST_PER_RUN = "cost_per_run"
    """Mean `RatchetCostUsd` of the finished runs (USD)."""
    FLAGGED = "flagged"
    """Runs a person flagged (`ratchet flag`) in the window over finished runs."""


class Op(StrEnum):
    LE = "<="
    GE = ">="
    LT = "<"
    GT = ">"


class Criterion(BaseModel):
    term: Term
    op: Op
    threshold: float
    relative: bool = False
    """`1.2x`: the threshold is 1.2 times the baseline build's figure."""

    def __str__(self) -> str:
        return f"{self.term}{self.op}{self.threshold:g}{'x' if self.relative else ''}"


class BuildFigures(BaseModel):
    """One build's finished runs in the guard's window, as visibility lists them."""

    build: str
    runs: int = 0
    """Runs that ended (closed and not continued as new)."""
    failed: int = 0
    budget_exhausted: int = 0
    verifier_runs: int = 0
    """Finished runs of an agent whose profile has a verifier."""
    verifier_passed: int = 0
    cost_usd: float = 0.0
    """The finished runs' cost, summed."""
    flagged: int = 0
    """Distinct runs of the build a person flagged in the window."""


class CriterionResult(BaseModel):
    criterion: str
    value: float | None = None
    """The ramped build's figure; None: no run to judge it by yet."""
    limit: float | None = None
    """The threshold it is held to (a relative one times the baseline's figure)."""
    held: bool | None = None
    """None: not judged yet (fewer than `min_runs` runs, and not broken whatever they turn out)."""


class Verdict(StrEnum):
    HOLDS = "holds"
    BROKEN = "broken"
    WAITING = "waiting"
    """Too few runs to judge yet."""


class Evaluation(BaseModel):
    at: str
    since: str
    """The window's start (the later of now - window and the guard's start)."""
    ramped: BuildFigures
    baseline: BuildFigures
    results: list[CriterionResult] = Field(default_factory=list)
    verdict: Verdict = Verdict.WAITING
    reason: str = ""
    routing: str = ""
    """The deployment's routing as the evaluation found it (`current X, ramping Y at P%`)."""
    routing_changed: bool = False
    """Someone else moved the routing (promoted, rolled back, ramped another build): the guard stops."""


class EvaluateGuard(BaseModel):
    """`deploy.evaluate`'s input."""

    request: GuardRequest
    criteria: list[Criterion]
    task_queue: str
    since: str
    """ISO time: the ramped build's runs (and flags) that closed from then on count."""
    baseline_since: str
    """The baseline's runs count from the guard's start: at a 100% ramp it takes no new ones, and a
    relative criterion still has its figure to compare with."""
    at: str
    percentage: float
    """The ramp the guard set (to notice someone else changing it)."""


class Route(BaseModel):
    """`deploy.route`'s input: ramp `build` to `percentage`, end the ramp (`build` None), or make
    `build` current (`promote`)."""

    deployment: str
    build: str | None
    percentage: float = 0.0
    promote: bool = False


class GuardPhase(StrEnum):
    RAMPING = "RAMPING"
    PROMOTED = "PROMOTED"
    ROLLED_BACK = "ROLLED_BACK"
    STOPPED = "STOPPED"
    """A person stopped it (the routing left as it was), or someone else changed the routing."""
    FAILED = "FAILED"
    """The deployment refused a change the guard asked for (the reason says which)."""


class GuardDecision(BaseModel):
    at: str
    action: str
    """`ramp`, `promote`, `rollback`, `stop` or `fail`."""
    percentage: float
    reason: str


class GuardStatus(BaseModel):
    """The guard's state: its `status` query while it runs, its result once it has ended."""

    request: GuardRequest
    phase: GuardPhase = GuardPhase.RAMPING
    step: int = 0
    """Index into `request.steps`."""
    percentage: float = 0.0
    started_at: str
    step_started_at: str
    evaluations: int = 0
    last: Evaluation | None = None
    reason: str | None = None
    """Why it ended (the broken criteria with their figures, a promotion, a stop)."""
    history: list[GuardDecision] = Field(default_factory=list)

    @property
    def ended(self) -> bool:
        return self.phase != GuardPhase.RAMPING

    def end(self, phase: GuardPhase, reason: str) -> None:
        self.phase, self.reason = phase, reason


class GuardInput(BaseModel):
    """`DeployGuardWorkflow`'s input: the request, and the status a continue-as-new carries."""

    request: GuardRequest
    carried: GuardStatus | None = None


class FlagRecord(BaseModel):
    """What a flag records (`RatchetFlag`'s input and result); its search attributes name the
    flagged run's build and agent."""

    run_id: str
    reason: str
    by: str | None = None
    build: str | None = None
    agent: str | None = None
