"""`RatchetClient` and `RunHandle`: the one way every surface (the CLI, `ratchet mcp`, tests, an
application's own code) talks to runs. A typed layer over a Temporal client: inputs validated
before they are sent, the names of queries, signals and updates from `RunMessages`, and errors
translated (ratchet/client/errors.py) instead of raw RPC errors.

    from ratchet.client import RatchetClient

    client = await RatchetClient.connect()          # the CLI's settings: TEMPORAL_*, RATCHET_*
    run = await client.start({"agent": "coder", "objective": "make the tests pass"})
    state = await run.state()
    await run.approve("call_3_0")
    result = await run.result()

A rollback works the same on a running run (its `rollback` update) and on a closed one (a
`RollbackWorkflow`, workflows/closed_rollback.py); its plan lists archived effects one by one.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ValidationError
from temporalio.client import (
    Client,
    WorkflowExecutionDescription,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowHistory,
)
from temporalio.exceptions import CancelledError

from ratchet.client import costs, listing, reads, stream
from ratchet.client.costs import CostReport
from ratchet.client.deploys import Deploys
from ratchet.client.schedules import Schedules
from ratchet.client.errors import (
    InvalidInput,
    NotStartedYet,
    Refused,
    RunCancelled,
    RunFailed,
    Unreachable,
    failure_reason,
)
from ratchet.client.inbox import InboxItem, inbox as inbox_runs
from ratchet.client.listing import RunFilter, RunPage, RunSummary
from ratchet.client.reads import PLANNED_WAIT_S
from ratchet.client.requests import RunRequests
from ratchet.client.rollback import RollbackOutcome, Rollbacks
from ratchet.client.audit import Audit, AuditEntry
from ratchet.client.audit import executions as audit_executions
from ratchet.client.signing import DecisionSigner
from ratchet.client.rpc import RunCalls
from ratchet.client.shadows import Shadows
from ratchet.client.shared_stream import SharedStreams
from ratchet.client.starting import start_run
from ratchet.contracts import (
    AgentResult,
    AgentRun,
    AgentState,
    Checkpoint,
    ResumeFrom,
    RollbackPlanItem,
    RunMessages,
    Transcript,
)
from ratchet.contracts.decisions import decision_value, rollback_digest
from ratchet.contracts.events import RunEvent
from ratchet.contracts.identity import Principal
from ratchet.ops.connection import TemporalUnreachable
from ratchet.ops.settings import Settings, load_settings
from ratchet.payloads.connect import connect

Output = TypeVar("Output", bound=BaseModel)


class RatchetClient:
    """Runs on the Temporal service `temporal` connects to, started on `settings.task_queue`."""

    def __init__(self, temporal: Client, settings: Settings) -> None:
        self.temporal, self.settings = temporal, settings
        self.shared_streams = SharedStreams()
        """One reader of each run's stream for this client's `open_stream(shared=True)` callers."""
        self.closed_states: OrderedDict[tuple[str, str], AgentState] = OrderedDict()
        """Closed runs' states by (workflow id, run id), newest read last (`RunHandle.closed_state`)."""
        self.deploys = Deploys(temporal, settings, self.get)
        """The worker deployment `settings.deployment_name`: its builds, ramp, promote, rollback, check."""
        self.schedules = Schedules(temporal, settings, self.get)
        """Runs and session messages started by time (Temporal Schedules)."""
        self.signer = settings.signer()
        """The key this client signs decisions with (RATCHET_SIGNING_KEY), or None: they go unsigned."""
        self.shadows = Shadows(temporal, settings, self.get)
        """Shadow runs of recorded runs with a candidate change: start, report, clean (ratchet/client/shadows.py)."""

    @property
    def address(self) -> str:
        """The Temporal service's address, as the errors that name it say it."""
        return self.temporal.service_client.config.target_host

    @classmethod
    async def connect(cls, settings: Settings | None = None) -> RatchetClient:
        """Connect as the CLI does: Temporal's environment configuration, the codec keys and
        external storage of `settings` (default: `load_settings()`, the environment)."""
        settings = settings if settings is not None else load_settings()
        try:
            return cls(await connect(settings), settings)
        except TemporalUnreachable as exc:
            raise Unreachable(exc.address, exc.reason) from None

    async def start(
        self, run: AgentRun | Mapping[str, Any] | str, workflow_id: str | None = None, new_run: bool = False
    ) -> RunHandle:
        """Start a run: an `AgentRun`, its fields, or its JSON (what `temporal workflow start --input`
        takes), validated first (InvalidInput names the field). Default id: `{agent}-{8 hex}`. An id
        a run already has is refused (IdInUse, naming that run's status), unless `new_run` and
        that run has closed: then a new run starts under the same id (Temporal's id reuse policy)."""
        started = await start_run(self.temporal, self.settings, run, workflow_id, new_run)
        return RunHandle(self, started.id, started)

    def get(self, workflow_id: str) -> RunHandle:
        """A handle on the run `workflow_id` (nothing is asked of the server yet)."""
        return RunHandle(self, workflow_id)

    async def inbox(self, person: str | None = None, role: str | None = None, limit: int = 50) -> list[InboxItem]:
        """The running runs handed to `person`'s inbox (`person:NAME` in a profile's handoffs) or
        `role`'s (neither: to anyone), newest first, each with its handoff record; answer one with
        `get(id).respond(...)`."""

        async def state_of(workflow_id: str) -> AgentState:
            return await self.get(workflow_id).state()

        return await inbox_runs(self.temporal, state_of, person, role, limit)

    async def list(
        self,
        agent: str | None = None,
        phase: str | None = None,
        awaiting_approval: bool | None = None,
        running: bool | None = None,
        query: str | None = None,
        limit: int = 50,
        session: bool | None = None,
        tenant: str | None = None,
    ) -> list[RunSummary]:
        """Runs, newest first, from Temporal's visibility store; `query` adds a raw visibility clause,
        `session` keeps only sessions (True) or only runs that are not (False), `tenant` one tenant's."""
        which = RunFilter(
            agent=agent,
            phase=phase,
            awaiting_approval=awaiting_approval,
            running=running,
            query=query,
            session=session,
            tenant=tenant,
        )
        return await listing.list_runs(self.temporal, which, limit)

    async def list_page(
        self,
        agent: str | None = None,
        phase: str | None = None,
        awaiting_approval: bool | None = None,
        running: bool | None = None,
        page_size: int = 50,
        page: str | None = None,
        session: bool | None = None,
        tenant: str | None = None,
    ) -> RunPage:
        """One page of `list` (newest first): `page` is the `next_page` of the page before (None:
        the first). One visibility request per page, however many runs there are."""
        which = RunFilter(
            agent=agent,
            phase=phase,
            awaiting_approval=awaiting_approval,
            running=running,
            session=session,
            tenant=tenant,
        )
        return await listing.list_page(self.temporal, which, page_size, page)


class RunHandle(RunRequests):
    """One run. Every method asks the server; errors are ratchet.client.errors. A handle from
    `start` waits in `result()` for the execution it started (and its continuations), one from
    `get` for the latest execution under the id."""

    def __init__(
        self, client: RatchetClient, workflow_id: str, started: WorkflowHandle[Any, AgentResult] | None = None
    ) -> None:
        self.client, self.workflow_id = client, workflow_id
        handle = started or client.temporal.get_workflow_handle(workflow_id, result_type=AgentResult)
        settings = client.settings
        key = client.signer
        signer = DecisionSigner(key, settings.decision_ttl_s, self.state, settings.cli_principal) if key else None
        super().__init__(RunCalls(client.temporal, workflow_id, handle), client.temporal.identity, signer)
        self._rollbacks = Rollbacks(self._calls, client.settings, self.state)

    async def state(self, timeout_s: float | None = None) -> AgentState:
        """The run's state (its `state` query); `timeout_s` bounds the wait for a worker to answer
        (Unavailable past it), for a caller that would rather show nothing than wait."""
        state = await self._calls.query(RunMessages.STATE, result_type=AgentState, timeout_s=timeout_s)
        if state is None:
            raise NotStartedYet(self.workflow_id)
        return state

    async def summary(self) -> RunSummary:
        """The run as visibility lists it (its search attributes: readable without the codec keys)."""
        return listing.summary(await self.describe())

    async def closed_state(self) -> AgentState:
        """The state of a closed run, read once per client and kept (CLOSED_STATES of them): it can
        no longer change, and each read replays the run's whole history on a worker. Refused if the
        run is running (ask `state`)."""
        return await reads.closed_state(self._calls, self.client.closed_states, self.state)

    async def running(self) -> bool:
        return await self._calls.running()

    async def result(self) -> AgentResult:
        """Wait for the run's result; RunFailed if it ended failed or terminated, RunCancelled if
        it was cancelled."""
        try:
            return await self._calls.ask("result", self._calls.handle.result())
        except WorkflowFailureError as exc:
            failed = RunCancelled if isinstance(exc.cause, CancelledError) else RunFailed
            raise failed(self.workflow_id, failure_reason(exc.cause or exc)) from None

    async def planned(self, timeout_s: float = PLANNED_WAIT_S) -> bool:
        """Wait until the run has been planned (`run.prepare`: its profile, tools and model
        resolved) or has ended: True. RunFailed with its reason if it failed, as a run of an unknown
        profile or whose provider cannot serve does at once. False if it is not planned within
        `timeout_s`: no worker has taken it (or its planning takes longer)."""
        return await reads.planned(self._calls, self.state, self.result, timeout_s)

    async def describe(self) -> WorkflowExecutionDescription:
        """What Temporal knows of the execution: status, times, pending activities (in
        `raw_description`), search attributes."""
        return await self._calls.describe()

    async def history(self, run_id: str | None = None) -> WorkflowHistory:
        """The run's event history as Temporal recorded it (of its latest run after a
        continue-as-new, or of the execution `run_id`): for replay, audits and timings read from the events."""
        handle = self._calls.handle
        if run_id is not None:
            handle = self.client.temporal.get_workflow_handle(self.workflow_id, run_id=run_id)
        return await self._calls.ask("history", handle.fetch_history())

    async def audit(self, history: WorkflowHistory | None = None) -> list[AuditEntry]:
        """Every decision the run accepted, with its proof, each checked again (ratchet/client/audit.py)
        against this client's RATCHET_APPROVER_KEYS (none set: the keys the run was planned with).
        `history`: check that history (an exported one) instead of the server's."""
        plan = (await self.state()).plan
        tools = [*plan.tools, *plan.retired_tools] if plan else []
        settings = self.client.settings
        keys = settings.trusted_keys or (plan.approver_keys if plan else {})
        audit = Audit(
            self.client.temporal.data_converter, self.workflow_id, keys, {t.name: t.schema_digest for t in tools}
        )
        chain = [history] if history is not None else await audit_executions(self.history)
        return await audit.entries(chain, settings.decision_leeway_s)

    async def output(self, model: type[Output]) -> Output:
        """The run's typed final answer as `model` (a run started with an `output_schema`, or of a
        profile with one: the answer was checked against it). RunFailed if the run failed or ended
        without one (BUDGET_EXHAUSTED); InvalidInput if the answer is not a valid `model`."""
        result = await self.result()
        if result.output is None:
            raise RunFailed(self.workflow_id, f"the run ended {result.phase} without a typed output")
        try:
            return model.model_validate(result.output)
        except ValidationError as exc:
            raise InvalidInput.of(f"output as {model.__name__}", exc) from None

    async def current_details(self) -> str:
        """What the Temporal Web UI shows as the run's current details (workflows/details.py):
        what it waits for, with the command that answers it, and its last checkpoint."""
        from temporalio.api.sdk.v1 import WorkflowMetadata

        query, answer = "__temporal_workflow_metadata", WorkflowMetadata
        return (await self._calls.query(query, result_type=answer, what="details")).current_details

    async def checkpoints(self) -> list[Checkpoint]:
        return (await self.state()).effects.checkpoints.items

    async def checkpoint(self, checkpoint_id: str) -> Checkpoint:
        """The run's checkpoint `checkpoint_id`; Refused naming the ones it has if there is none."""
        checkpoints = await self.checkpoints()
        for checkpoint in checkpoints:
            if checkpoint.id == checkpoint_id:
                return checkpoint
        have = ", ".join(c.id for c in checkpoints) or "none"
        raise Refused("checkpoint", f"{self.workflow_id} has no checkpoint {checkpoint_id!r} (it has: {have})")

    async def patch(self, checkpoint: str | Checkpoint) -> str | None:
        """The patch the checkpoint accepted, as a unified diff (None: the step changed no file),
        read from the artifact store. Given the `Checkpoint` itself (from a state already read),
        the run is not asked again."""
        if isinstance(checkpoint, str):
            checkpoint = await self.checkpoint(checkpoint)
        return await reads.patch(self.client.settings, checkpoint)

    async def transcript(self, offset: int = 0, limit: int = 50, state: AgentState | None = None) -> Transcript:
        """Messages `offset` .. `offset + limit` of the conversation; those from before a
        continue-as-new are read from the transcript artifact in the artifact store. Given the
        run's `state` (read already), the run is not asked again."""
        return await reads.transcript(self._calls, self.client.settings, offset, limit, state, self.state)

    async def cost(self) -> CostReport:
        """What the run was billed, every model attempt (failed ones, retries, fallbacks) and its
        sub-agents', by step and cause, from the billing ledger in the ledger's database."""
        report = await asyncio.to_thread(costs.report, self.client.settings, self.workflow_id)
        if not report.lines:
            await self.summary()  # nothing billed: RunNotFound if there is no such run
        return report

    async def rollback_plan(self, checkpoint_id: str) -> list[RollbackPlanItem]:
        """What a rollback to the checkpoint would undo, newest first, archived effects included;
        running or closed (a closed run's plan comes from its dry-run RollbackWorkflow)."""
        return await self._rollbacks.plan(checkpoint_id)

    async def rollback(
        self,
        checkpoint_id: str,
        then: Literal["continue", "stop", "rerun"] | None = None,
        dry_run: bool = False,
        principal: Principal | None = None,
    ) -> RollbackOutcome:
        """Undo the effects after `checkpoint_id`, newest first, each at most once. A running run
        interrupts its step and rolls back (`then`: go on from the checkpoint, the default, stop,
        or rerun from it on the worker deployment's current build); a closed one (DONE, FAILED,
        cancelled, ...) through a RollbackWorkflow under the id
        derived from the request, so one that completed before is not run again: its result comes
        back (`earlier`); `then` does not apply to it (ratchet/client/rollback.py). A running run's
        rollback is signed as `principal` where this client has a signing key (docs/SECURITY.md)."""
        proof = None
        if not dry_run:
            value, digest = (
                decision_value("rollback", checkpoint_id),
                rollback_digest(checkpoint_id, then or "continue"),
            )
            proof = await self._proof(checkpoint_id, value, principal, digest)
        return await self._rollbacks.roll_back(checkpoint_id, then, dry_run, proof)

    def stream(self, from_offset: int = 0, topics: Iterable[str] | None = None) -> AsyncIterator[RunEvent]:
        """The run's events (ratchet/contracts/events.py) from `from_offset` on, as they happen,
        until the run closes; topics: `tokens`, `steps`, `answer` (default: all). Resume after a
        disconnect from the last event's `offset + 1`. ratchet/client/stream.py."""
        return stream.events(self._calls, from_offset, topics)

    async def stream_end(self) -> int:
        """The offset the next event of the run's stream will have (to read only what comes next)."""
        return await stream.end_of(self._calls)

    async def open_stream(
        self, from_offset: int = 0, topics: Iterable[str] | None = None, shared: bool = False
    ) -> AsyncIterator[RunEvent]:
        """`stream`, with its errors (RunNotFound, InvalidInput) raised here rather than at the first
        event. `shared`: read through the client's one reader of the run (ratchet/client/shared_stream.py),
        for a server whose readers come and go (a page's live view): a reader that leaves can then
        never leave a poll update in flight on the run beside the one the shared reader has."""
        if shared:
            return await self.client.shared_streams.open(self._calls, from_offset, list(topics or []))
        return await stream.opened(self._calls, from_offset, topics)

    async def fork(self, checkpoint_id: str, objective: str | None = None, new_id: str | None = None) -> RunHandle:
        """A new run from this run's checkpoint: its conversation and workspace files."""
        source = await self.state()
        run = source.run.model_copy(
            update={
                "resume_from": ResumeFrom(workflow_id=self.workflow_id, checkpoint_id=checkpoint_id),
                "objective": objective or source.run.objective,
                "workspace": None,
            }
        )
        return await self.client.start(run, new_id or f"{self.workflow_id}-fork-{uuid.uuid4().hex[:6]}")
