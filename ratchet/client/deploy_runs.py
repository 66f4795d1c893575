"""The runs of a worker deployment, as the deploy verbs (ratchet/client/deploys.py) read and move
them: each build's runs counted by visibility, the sessions that would move to a build, the idle
sessions told to look at their build, and the open runs of a bad build rolled back and rerun."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from temporalio.client import Client
from temporalio.service import RPCError

from ratchet.client.deploy_reports import Rerun, RunLike, VersionStatus
from ratchet.client.errors import InvalidInput, RatchetError, rpc_error
from ratchet.client.listing import RunFilter, RunSummary, list_runs
from ratchet.client.rpc import RunCalls
from ratchet.contracts import AGENT_WORKFLOW, TO_START, RunMessages
from ratchet.contracts.base import TERMINAL_PHASES
from ratchet.contracts.search_attributes import RunAttributes
from ratchet.deploys import deployments
from ratchet.deploys.deployments import Deployment

DEPLOYMENT_ATTRIBUTE = "TemporalWorkerDeployment"
"""Temporal's own search attribute: the worker deployment a versioned run belongs to (it scopes a
build id, which two deployments may share)."""
RERUNS_AT_ONCE = 8
"""Runs rolled back at the same time (each waits for its undos on the bad build's workers)."""
RERUN_LIMIT = 1000
"""At most this many open runs of a bad build are rolled back and rerun by one `rollback(rerun=True)`."""


class DeploymentRuns:
    """The runs of worker deployment `deployment` on `temporal`; `get` gives a run's handle."""

    def __init__(self, temporal: Client, deployment: str, get: Callable[[str], RunLike]) -> None:
        self.temporal, self.deployment, self.get = temporal, deployment, get

    @property
    def address(self) -> str:
        return self.temporal.service_client.config.target_host

    async def moving(self, build: str) -> list[RunSummary]:
        """Open sessions on another build of the deployment that may upgrade: they move to `build`
        at their next turn boundary once it is current (one-shot runs stay pinned)."""
        query = f'{DEPLOYMENT_ATTRIBUTE}="{self.deployment}" AND {RunAttributes.BUILD}!="{quoted(build)}"'
        sessions = await list_runs(self.temporal, RunFilter(running=True, session=True, query=query), RERUN_LIMIT)
        moving = []
        for run in sessions:
            try:
                raw = await self.calls(run.workflow_id).query(RunMessages.STATE, result_type=dict, what="state")
            except RatchetError:
                moving.append(run)  # unreadable: `check` says so
                continue
            session = ((raw or {}).get("plan") or {}).get("session")
            if session is not None and session.get("upgrade", "at_turns") == "at_turns":
                moving.append(run)
        return moving

    async def move_idle_sessions(self) -> int:
        """Tell the deployment's idle sessions (waiting for a message) to look at their build: those
        the routing now sends to another build move there at once (`RunHandle.move`; a session
        with `upgrade: never`, or already where the routing sends it, stays). Returns how many were told."""
        query = f'{DEPLOYMENT_ATTRIBUTE}="{self.deployment}" AND {RunAttributes.PHASE}="AWAITING_MESSAGE"'
        idle = await list_runs(self.temporal, RunFilter(running=True, session=True, query=query), RERUN_LIMIT)
        limit = asyncio.Semaphore(RERUNS_AT_ONCE * 4)

        async def tell(workflow_id: str) -> bool:
            async with limit:
                try:
                    await self.get(workflow_id).move()
                except RatchetError:  # it ended meanwhile
                    return False
                return True

        return sum(await asyncio.gather(*(tell(run.workflow_id) for run in idle)))

    async def rerun_all(self, bad: str) -> list[Rerun]:
        query = f'{DEPLOYMENT_ATTRIBUTE}="{self.deployment}" AND {RunAttributes.BUILD}="{quoted(bad)}"'
        open_runs = await list_runs(self.temporal, RunFilter(running=True, query=query), RERUN_LIMIT)
        limit = asyncio.Semaphore(RERUNS_AT_ONCE)

        async def rerun(workflow_id: str) -> Rerun:
            async with limit:
                return await self._rerun(self.get(workflow_id))

        return list(await asyncio.gather(*(rerun(run.workflow_id) for run in open_runs)))

    async def _rerun(self, run: RunLike) -> Rerun:
        """Roll `run` back to its last checkpoint (its start without one) and rerun it from there on
        the deployment's current build."""
        target = TO_START
        try:
            checkpoints = (await run.state()).effects.checkpoints.items
            target = checkpoints[-1].id if checkpoints else TO_START
            outcome = await run.rollback(target, then="rerun")
        except RatchetError as exc:
            return Rerun(workflow_id=run.workflow_id, checkpoint_id=target, rerun=False, summary=f"not rerun: {exc}")
        undone = len(outcome.report.undone) if outcome.report else 0
        if not outcome.running:  # it closed on the way: rolled back as a closed run, nothing to rerun
            return Rerun(
                workflow_id=run.workflow_id,
                checkpoint_id=target,
                rerun=False,
                undone=undone,
                summary=f"it closed meanwhile: rolled back as a closed run, not rerun ({outcome.summary()})",
            )
        return Rerun(
            workflow_id=run.workflow_id, checkpoint_id=target, rerun=True, undone=undone, summary=outcome.summary()
        )

    async def version(self, found: Deployment, version: deployments.Version) -> VersionStatus:
        runs = f'WorkflowType="{AGENT_WORKFLOW}" AND {DEPLOYMENT_ATTRIBUTE}="{found.name}" AND '
        runs += f'{RunAttributes.BUILD}="{quoted(version.build_id)}"'
        phases = sorted(TERMINAL_PHASES)
        counts = await asyncio.gather(
            self._count(f'{runs} AND ExecutionStatus="Running"'),
            *(self._count(f'{runs} AND ExecutionStatus!="Running" AND {RunAttributes.PHASE}="{p}"') for p in phases),
        )
        return VersionStatus(
            build_id=version.build_id,
            status=version.status,
            current=version.build_id == found.current,
            ramping=version.build_id == found.ramping,
            ramp_percentage=found.ramp_percentage if version.build_id == found.ramping else 0.0,
            open_runs=counts[0],
            drained=version.drained,
            outcomes={str(p): n for p, n in zip(phases, counts[1:]) if n},
            last_current=version.last_current,
        )

    async def _count(self, query: str) -> int:
        try:
            return (await self.temporal.count_workflows(query)).count
        except RPCError as exc:
            raise rpc_error("cannot count runs", exc, self.address) from None

    def calls(self, workflow_id: str) -> RunCalls:
        handle = self.temporal.get_workflow_handle(workflow_id)
        return RunCalls(self.temporal, workflow_id, handle)


def quoted(value: str) -> str:
    """A value inside a visibility query's double quotes (build ids allow no quote: checked anyway)."""
    if '"' in value or "\\" in value:
        raise InvalidInput("deploy", [f"build: no quotes or backslashes, not {value!r}"])
    return value
