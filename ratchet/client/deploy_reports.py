"""What the deploy verbs report (`RatchetClient.deploys`, ratchet/client/deploys.py): a build's and the
deployment's status, a routing change, a rollback and its reruns, a candidate's check; and what the
verbs need of a run and of a candidate build's code (`RunLike`, `Candidate`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Literal, Protocol

from pydantic import BaseModel, Field
from temporalio.client import WorkflowHistory

from ratchet.client.rollback import RollbackOutcome
from ratchet.contracts import AgentState, GuardStatus


class VersionStatus(BaseModel):
    """One build of the deployment, as `status` shows it."""

    build_id: str
    status: str
    """Temporal's: CURRENT, RAMPING, DRAINING (runs still pinned to it), DRAINED, INACTIVE (never
    current), CREATED."""
    current: bool = False
    ramping: bool = False
    ramp_percentage: float = 0.0
    open_runs: int = 0
    """Runs on it now (RatchetBuildId, ExecutionStatus Running): one-shot runs pinned to it until
    they end, sessions until their next turn boundary."""
    drained: bool | None = None
    """No run is pinned to it any more (None: Temporal has not checked: only builds that stopped
    taking new runs are checked)."""
    outcomes: dict[str, int] = Field(default_factory=dict)
    """Closed runs that ended on it, by RatchetPhase (DONE, FAILED, ...)."""
    last_current: datetime | None = None
    """When it last became current (None: never)."""


class DeployStatus(BaseModel):
    """The deployment's builds, its routing and its ramp guard."""

    deployment: str
    current: str | None = None
    ramping: str | None = None
    ramp_percentage: float = 0.0
    previous: str | None = None
    """The build `rollback` makes current again."""
    versions: list[VersionStatus] = Field(default_factory=list)
    guard: GuardStatus | None = None
    """The ramp guard's state if one ran for this deployment (its last one)."""
    guard_problem: str | None = None
    """Why the guard's state could not be read (it was terminated, it has not started yet)."""


def guard_lines(guard: GuardStatus) -> list[str]:
    """The guard in a few lines, for a person: its phase and step, why it ended or its last
    verdict, then its decisions (ramp, promote, rollback, stop), oldest first."""
    request = guard.request
    steps = ", ".join(f"{s:g}%" for s in request.steps)
    head = (
        f"{guard.phase} {request.build} at {guard.percentage:g}% (step {guard.step + 1} of {len(request.steps)}: "
        f"{steps}; baseline {request.baseline}), {guard.evaluations} evaluations; criteria {request.criteria}"
    )
    lines = [head]
    if guard.reason:
        lines.append(f"reason: {guard.reason}")
    elif guard.last is not None:
        why = f": {guard.last.reason}" if guard.last.reason else ""
        lines.append(f"last: {guard.last.verdict} at {guard.last.at}{why}")
    lines += [f"{d.at} {d.action} at {d.percentage:g}%: {d.reason}" for d in guard.history]
    return lines


class Routed(BaseModel):
    """What a routing verb changed."""

    deployment: str
    current: str | None
    """The build new runs start on now."""
    ramping: str | None = None
    ramp_percentage: float = 0.0
    previous: str | None = None
    """The build that was current before (promote, rollback) or ramping (rollback during a ramp)."""
    guard: str | None = None
    """The guard workflow's id, if `ramp` started one."""
    guard_stopped: bool = False
    """A running guard was stopped (`promote` and `rollback` by hand end it)."""
    sessions_told: int = 0
    """Idle sessions of the deployment told to look at their build (`move`): those the new routing
    sends elsewhere move now, so the build they were on drains without waiting for their next message."""


class Rerun(BaseModel):
    """One open run of a bad build after `rollback(rerun=True)`."""

    workflow_id: str
    checkpoint_id: str
    """Where it was rolled back to: its last checkpoint, or `start`."""
    rerun: bool
    """It was rolled back and continues as new on the restored build."""
    undone: int = 0
    summary: str
    """What happened, in a line: the rollback's summary, or why it did not happen."""


class DeployRollback(Routed):
    bad: str
    """The build rolled back from (the ramping one during a ramp, else the one that was current)."""
    ended_ramp: bool = False
    reruns: list[Rerun] = Field(default_factory=list)


class CheckProblem(BaseModel):
    """Why a candidate build cannot take a run over, in the agent's terms."""

    workflow_id: str
    source: str
    """`run` (an open run that would move), `state` (its state as the candidate reads it), or the
    corpus file."""
    where: str = ""
    """`step 7, model call`, `turn 3`, `state.plan.tools`, ..."""
    what: str

    def __str__(self) -> str:
        where = f" at {self.where}" if self.where else ""
        return f"{self.workflow_id} ({self.source}){where}: {self.what}"


class DeployCheck(BaseModel):
    build: str
    corpus: int = 0
    """Recorded histories replayed."""
    runs: list[str] = Field(default_factory=list)
    """The open runs that would move to `build`, each replayed and its state read."""
    problems: list[CheckProblem] = Field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


class Candidate(Protocol):
    """The code of a build to check, as installed where the check runs (ratchet/replay/candidate.py)."""

    build_id: str

    async def replay(self, histories: Sequence[WorkflowHistory]) -> tuple[int, list[CheckProblem]]:
        """The recorded corpus and `histories` replayed: how many corpus histories, and each divergence."""
        ...

    def unreadable(self, workflow_id: str, state: Mapping[str, Any]) -> list[CheckProblem]:
        """Why a moving run's state (the `state` query's JSON) could not be carried onto this build."""
        ...


class RunLike(Protocol):
    """What `rollback(rerun=True)` and the routing verbs need of a run (a `RunHandle`)."""

    workflow_id: str

    async def move(self) -> None: ...

    async def state(self, timeout_s: float | None = None) -> AgentState: ...

    async def rollback(
        self, checkpoint_id: str, then: Literal["continue", "stop", "rerun"] | None = None, dry_run: bool = False
    ) -> RollbackOutcome: ...
