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
import base64
import json
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, Field, ValidationError
from temporalio.client import (
    Client,
    WorkflowExecution,
    WorkflowExecutionDescription,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowHistory,
    WorkflowQueryFailedError,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import CancelledError, WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from ratchet.client import stream
from ratchet.client.shared_stream import SharedStreams
from ratchet.client.errors import (
    IdInUse,
    InvalidInput,
    NotStartedYet,
    RatchetError,
    Refused,
    RunCancelled,
    RunClosed,
    RunFailed,
    RunNotFound,
    SessionEnded,
    Unavailable,
    Unreachable,
    ended,
    failure_reason,
    lost_connection,
    rpc_error,
)
from ratchet.contracts import (
    AGENT_WORKFLOW,
    ROLLBACK_WORKFLOW,
    AgentResult,
    AgentRun,
    AgentState,
    MAX_MESSAGE_CHARS,
    ApproveRequest,
    AskRequest,
    Checkpoint,
    ClosedRollback,
    DecideRequest,
    FollowRequest,
    Message,
    OutcomeChoice,
    Phase,
    RejectRequest,
    ResumeFrom,
    RollbackPlanItem,
    RollbackReport,
    RollbackRequest,
    RollbackRun,
    RunMessages,
    Transcript,
    TranscriptPage,
    TurnAnswer,
    rollback_id,
)
from ratchet.contracts.events import RunEvent
from ratchet.ops.settings import Settings

T = TypeVar("T")
CLOSED_STATES = 100
"""Closed runs' states a client keeps (a 200-step run's is about 100 KB)."""
QUERY_FIRST_WAIT_S, QUERY_DEADLINE_S, QUERY_BUSY_PAUSE_S = 5.0, 35.0, 0.2
"""A query's first attempt waits 5 s for its answer, each next one twice as long, all 35 s at most;
after a "buffer full" it is asked again 0.2 s later (RunHandle._query)."""
Output = TypeVar("Output", bound=BaseModel)
PLANNED_WAIT_S, PLANNED_POLL_S = 30.0, 0.1
"""`RunHandle.planned` waits at most 30 s, asking every 0.1 s."""
FIRST_TASK_EVENTS = 3
"""A new execution's history before its first workflow task completes: started, task scheduled, task started."""


class RunSummary(BaseModel):
    """A run as Temporal's visibility lists it, with Ratchet's search attributes."""

    workflow_id: str
    status: str
    agent: str | None = None
    phase: str | None = None
    awaiting_approval: bool = False
    start_time: datetime | None = None
    session: bool = False
    turn: int | None = None
    """A session's latest turn (RatchetTurn)."""
    steps: int | None = None
    """Steps taken when the run last came to wait or closed (RatchetSteps; while `phase` is RUNNING
    it is older than that: ask the run's state)."""
    cost_usd: float | None = None
    """What it had spent then (RatchetCostUsd)."""


class RunPage(BaseModel):
    """One page of `RatchetClient.list_page`: the runs, and the token of the next page (None: the last)."""

    runs: list[RunSummary]
    next_page: str | None = None


class TranscriptSlice(BaseModel):
    """Consecutive messages of a run's conversation, the first at index `offset`, of `total`."""

    offset: int
    total: int
    messages: list[Message]


class RollbackOutcome(BaseModel):
    """What a rollback did (or, as a dry run, would do)."""

    workflow_id: str
    checkpoint_id: str
    running: bool
    """The run was running: its `rollback` update did it. Else a `RollbackWorkflow` did (`closed`)."""
    plan: list[RollbackPlanItem]
    report: RollbackReport | None = None
    """What was undone (None: a dry run, or a closed run's dry run)."""
    closed: ClosedRollback | None = None
    rollback_workflow_id: str | None = None
    earlier: bool = False
    """A closed run was rolled back to this checkpoint before: this is that rollback's result."""
    closed_meanwhile: bool = False
    """The run closed while the request was on its way: it was rolled back as a closed run."""
    turns_removed: list[int] = Field(default_factory=list)
    """A running session's turns the rollback takes out of the conversation (or, as a dry run,
    would): those after the checkpoint's turn, newest last."""

    @property
    def clean(self) -> bool:
        return self.report is None or self.report.clean

    @property
    def complete(self) -> bool:
        """Everything the rollback was asked to undo is undone (nothing irreversible left, no undo
        failed); a dry run is complete."""
        return self.report is None or (self.report.clean and not self.report.irreversible)

    def summary(self) -> str:
        """One line: how many effects were undone, how many stay done and why."""
        report = self.report
        turns = f"; turns removed: {', '.join(map(str, self.turns_removed))}" if self.turns_removed else ""
        if report is None:
            return f"dry run: {sum(1 for item in self.plan if item.action == 'undo')} to undo, nothing changed{turns}"
        parts = [f"undone {len(report.undone)}"]
        if report.irreversible:
            parts.append(f"left in place {len(report.irreversible)} (irreversible: {', '.join(report.irreversible)})")
        if report.not_undone:
            parts.append(f"not undone {len(report.not_undone)} ({'; '.join(report.errors) or 'the undo failed'})")
        return "; ".join(parts) + turns


class RatchetClient:
    """Runs on the Temporal service `temporal` connects to, started on `settings.task_queue`."""

    def __init__(self, temporal: Client, settings: Settings) -> None:
        self.temporal, self.settings = temporal, settings
        self.shared_streams = SharedStreams()
        """One reader of each run's stream for this client's `open_stream(shared=True)` callers."""
        self.closed_states: OrderedDict[tuple[str, str], AgentState] = OrderedDict()
        """Closed runs' states by (workflow id, run id), newest read last (`RunHandle.closed_state`)."""

    @property
    def address(self) -> str:
        """The Temporal service's address, as the errors that name it say it."""
        return self.temporal.service_client.config.target_host

    @classmethod
    async def connect(cls, settings: Settings | None = None) -> RatchetClient:
        """Connect as the CLI does: Temporal's environment configuration, the codec keys and
        external storage of `settings` (default: `load_settings()`, the environment)."""
        from ratchet.ops.settings import load_settings
        from ratchet.plugin import connect

        from ratchet.ops.connection import TemporalUnreachable

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
        checked = validated_run(run)
        workflow_id = workflow_id or f"{checked.agent}-{uuid.uuid4().hex[:8]}"
        reuse = WorkflowIDReusePolicy.ALLOW_DUPLICATE if new_run else WorkflowIDReusePolicy.REJECT_DUPLICATE
        try:
            started = await self.temporal.start_workflow(
                AGENT_WORKFLOW,
                checked.model_dump(exclude_none=True, mode="json"),
                id=workflow_id,
                task_queue=self.settings.task_queue,
                result_type=AgentResult,
                static_summary=start_summary(checked),
                id_reuse_policy=reuse,
            )
        except WorkflowAlreadyStartedError:
            description = await self.get(workflow_id).describe()
            phase = (description.search_attributes.get("RatchetPhase") or [None])[0]
            status = description.status.name if description.status else "CLOSED"
            raise IdInUse(workflow_id, str(phase) if phase is not None else None, status) from None
        except RPCError as exc:
            raise rpc_error(f"cannot start {workflow_id}", exc, self.address) from None
        return RunHandle(self, workflow_id, started)

    def get(self, workflow_id: str) -> RunHandle:
        """A handle on the run `workflow_id` (nothing is asked of the server yet)."""
        return RunHandle(self, workflow_id)

    async def list(
        self,
        agent: str | None = None,
        phase: str | None = None,
        awaiting_approval: bool | None = None,
        running: bool | None = None,
        query: str | None = None,
        limit: int = 50,
        session: bool | None = None,
    ) -> list[RunSummary]:
        """Runs, newest first, from Temporal's visibility store; `query` adds a raw visibility clause,
        `session` keeps only sessions (True) or only runs that are not (False)."""
        found = []
        try:
            async for run in self.temporal.list_workflows(
                _visibility(agent, phase, awaiting_approval, running, query, session), limit=limit
            ):
                found.append(_summary(run))
        except RPCError as exc:
            raise rpc_error("cannot list runs", exc, self.address) from None
        return found

    async def list_page(
        self,
        agent: str | None = None,
        phase: str | None = None,
        awaiting_approval: bool | None = None,
        running: bool | None = None,
        page_size: int = 50,
        page: str | None = None,
        session: bool | None = None,
    ) -> RunPage:
        """One page of `list` (newest first): `page` is the `next_page` of the page before (None:
        the first). One visibility request per page, however many runs there are."""
        try:
            token = base64.urlsafe_b64decode(page.encode()) if page else None
        except ValueError:
            raise InvalidInput("runs page", [f"page: not a page token: {page!r}"]) from None
        listing = self.temporal.list_workflows(
            _visibility(agent, phase, awaiting_approval, running, None, session),
            page_size=page_size,
            next_page_token=token,
        )
        try:
            await listing.fetch_next_page(page_size=page_size)
        except RPCError as exc:
            if exc.status == RPCStatusCode.INVALID_ARGUMENT:
                raise InvalidInput("runs page", [f"page: {exc.message}"]) from None
            raise rpc_error("cannot list runs", exc, self.address) from None
        following = listing.next_page_token
        return RunPage(
            runs=[_summary(run) for run in listing.current_page or []],
            next_page=base64.urlsafe_b64encode(following).decode() if following else None,
        )


def _visibility(
    agent: str | None,
    phase: str | None,
    awaiting_approval: bool | None,
    running: bool | None,
    query: str | None,
    session: bool | None = None,
) -> str:
    """The visibility query of a listing: Ratchet's runs, with its search attributes as filters."""
    clauses = [f'WorkflowType="{AGENT_WORKFLOW}"']
    for name, value in (("RatchetPhase", phase), ("RatchetAgent", agent)):
        if value:
            if '"' in value or "\\" in value:
                raise InvalidInput("runs filter", [f"{name}: no quotes or backslashes, not {value!r}"])
            clauses.append(f'{name}="{value}"')
    if awaiting_approval is not None:
        clauses.append(f"RatchetAwaitingApproval={'true' if awaiting_approval else 'false'}")
    if running:
        clauses.append('ExecutionStatus="Running"')
    if session is not None:
        clauses.append("RatchetSession=true" if session else "RatchetSession IS NULL")  # only sessions carry it
    if query:
        clauses.append(f"({query})")
    return " AND ".join(clauses)


def _summary(run: WorkflowExecution) -> RunSummary:
    attributes = run.search_attributes
    return RunSummary(
        workflow_id=run.id,
        status=run.status.name if run.status else "-",
        agent=(attributes.get("RatchetAgent") or [None])[0],
        phase=(attributes.get("RatchetPhase") or [None])[0],
        awaiting_approval=bool((attributes.get("RatchetAwaitingApproval") or [False])[0]),
        start_time=run.start_time,
        session=bool((attributes.get("RatchetSession") or [False])[0]),
        turn=(attributes.get("RatchetTurn") or [None])[0],
        steps=(attributes.get("RatchetSteps") or [None])[0],
        cost_usd=(attributes.get("RatchetCostUsd") or [None])[0],
    )


class RunHandle:
    """One run. Every method asks the server; errors are ratchet.client.errors. A handle from
    `start` waits in `result()` for the execution it started (and its continuations), one from
    `get` for the latest execution under the id."""

    def __init__(
        self, client: RatchetClient, workflow_id: str, started: WorkflowHandle[Any, AgentResult] | None = None
    ) -> None:
        self.client, self.workflow_id = client, workflow_id
        self._handle: WorkflowHandle[Any, AgentResult] = started or client.temporal.get_workflow_handle(
            workflow_id,
            result_type=AgentResult,
        )

    async def state(self, timeout_s: float | None = None) -> AgentState:
        """The run's state (its `state` query); `timeout_s` bounds the wait for a worker to answer
        (Unavailable past it), for a caller that would rather show nothing than wait."""
        state = await self._query(RunMessages.STATE, result_type=AgentState, timeout_s=timeout_s)
        if state is None:
            raise NotStartedYet(self.workflow_id)
        return state

    async def summary(self) -> RunSummary:
        """The run as visibility lists it (its search attributes: readable without the codec keys)."""
        return _summary(await self.describe())

    async def closed_state(self) -> AgentState:
        """The state of a closed run, read once per client and kept (CLOSED_STATES of them): it can
        no longer change, and each read replays the run's whole history on a worker. Refused if the
        run is running (ask `state`)."""
        description = await self.describe()
        if description.status == WorkflowExecutionStatus.RUNNING:
            raise Refused("closed state", f"{self.workflow_id} is running")
        key = (self.workflow_id, description.run_id)
        kept = self.client.closed_states
        if key not in kept:
            kept[key] = await self.state()
            while len(kept) > CLOSED_STATES:
                kept.popitem(last=False)
        kept.move_to_end(key)
        return kept[key]

    async def running(self) -> bool:
        description = await self.describe()
        return description.status == WorkflowExecutionStatus.RUNNING

    async def result(self) -> AgentResult:
        """Wait for the run's result; RunFailed if it ended failed or terminated, RunCancelled if
        it was cancelled."""
        try:
            return await self._ask("result", self._handle.result())
        except WorkflowFailureError as exc:
            failed = RunCancelled if isinstance(exc.cause, CancelledError) else RunFailed
            raise failed(self.workflow_id, failure_reason(exc.cause or exc)) from None

    async def planned(self, timeout_s: float = PLANNED_WAIT_S) -> bool:
        """Wait until the run has been planned (`run.prepare`: its profile, tools and model
        resolved) or has ended: True. RunFailed with its reason if it failed, as a run of an unknown
        profile or whose provider cannot serve does at once. False if it is not planned within
        `timeout_s`: no worker has taken it (or its planning takes longer)."""
        clock = asyncio.get_running_loop()
        deadline = clock.time() + timeout_s
        while (left_s := deadline - clock.time()) > 0:
            description = await self.describe()
            if description.status != WorkflowExecutionStatus.RUNNING:
                await self.result()  # RunFailed (RunCancelled) if it did not end well
                return True
            if description.history_length > FIRST_TASK_EVENTS:  # a worker has run it: it answers queries
                try:
                    state = await self.state(timeout_s=max(left_s, 1.0))
                    if state.plan is not None:
                        return True  # a run that failed being planned has none: it closes next
                except NotStartedYet:
                    pass
            await asyncio.sleep(min(PLANNED_POLL_S, max(left_s, 0)))
        return False

    async def describe(self) -> WorkflowExecutionDescription:
        """What Temporal knows of the execution: status, times, pending activities (in
        `raw_description`), search attributes."""
        return await self._ask("describe", self._handle.describe())

    async def history(self, run_id: str | None = None) -> WorkflowHistory:
        """The run's event history as Temporal recorded it (of its latest run after a
        continue-as-new, or of the execution `run_id`): for replay, audits and timings read from the events."""
        handle = (
            self._handle
            if run_id is None
            else self.client.temporal.get_workflow_handle(self.workflow_id, run_id=run_id)
        )
        return await self._ask("history", handle.fetch_history())

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

        metadata = await self._query("__temporal_workflow_metadata", result_type=WorkflowMetadata, what="details")
        return metadata.current_details

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
        from ratchet.stores.urls import open_artifacts

        if isinstance(checkpoint, str):
            checkpoint = await self.checkpoint(checkpoint)
        if checkpoint.patch_ref is None:
            return None
        store = open_artifacts(self.client.settings.artifact_store_url)
        data = await asyncio.to_thread(store.get, checkpoint.patch_ref)
        return data.decode(errors="replace")

    async def transcript(self, offset: int = 0, limit: int = 50, state: AgentState | None = None) -> TranscriptSlice:
        """Messages `offset` .. `offset + limit` of the conversation; those from before a
        continue-as-new are read from the transcript artifact in the artifact store. Given the
        run's `state` (read already), the run is not asked again."""
        try:
            request = TranscriptPage(offset=offset, limit=limit)
        except ValidationError as exc:
            raise InvalidInput.of("transcript page", exc) from None
        if state is not None:
            page = state.conversation.page(offset, limit)
        else:
            page = await self._query(RunMessages.TRANSCRIPT, request, result_type=Transcript)
        messages, first = list(page.messages), page.offset
        if offset < page.offset:
            earlier = await self._earlier(offset, min(page.offset, offset + limit), state)
            if earlier:
                messages, first = (earlier + messages)[:limit], offset
        return TranscriptSlice(offset=first, total=page.total, messages=messages)

    async def approve(self, call_id: str, by: str | None = None) -> str:
        """Approve a pending call; the decision records `by` (default: this client's identity) and when."""
        try:
            request = ApproveRequest(call_id=call_id, by=self._by(by))
        except ValidationError as exc:
            raise InvalidInput.of("approval", exc) from None
        return await self._update(RunMessages.APPROVE, request, str)

    async def reject(self, call_id: str, reason: str = "rejected by a person", by: str | None = None) -> str:
        try:
            request = RejectRequest(call_id=call_id, reason=reason, by=self._by(by))
        except ValidationError as exc:
            raise InvalidInput.of("rejection", exc) from None
        return await self._update(RunMessages.REJECT, request, str)

    async def decide(
        self,
        call_id: str,
        choice: OutcomeChoice | str,
        result: str | None = None,
        reason: str = "",
        by: str | None = None,
    ) -> str:
        try:
            request = DecideRequest(call_id=call_id, choice=choice, result=result, reason=reason, by=self._by(by))
        except ValidationError as exc:
            raise InvalidInput.of("decision", exc) from None
        return await self._update(RunMessages.DECIDE, request, str)

    async def send(self, text: str) -> None:
        """A message, fire and forget: it joins the conversation at the next step boundary (a
        session: as its message policy says)."""
        if not text.strip():
            raise InvalidInput("message", ["text: must not be empty"])
        if len(text) > MAX_MESSAGE_CHARS:
            raise InvalidInput("message", [f"text: at most {MAX_MESSAGE_CHARS:,} characters, not {len(text):,}"])
        await self._ask(RunMessages.SEND_MESSAGE, self._handle.signal(RunMessages.SEND_MESSAGE, text))

    async def ask(self, text: str, message_id: str | None = None, wait: bool = True) -> TurnAnswer:
        """A session's message; the answer of the turn that answers it (`wait=False`: at once, the
        turn to follow with `answer(message_id)`). The same `message_id` sent again is answered
        once (give your own to retry safely); reused for another text it is refused. Refused too:
        a closed session (naming how it ended), a run that is not a session, a message during a
        turn under the reject policy."""
        try:
            request = AskRequest(
                message_id=uuid.uuid4().hex if message_id is None else message_id, text=text, wait=wait
            )
        except ValidationError as exc:
            raise InvalidInput.of("message", exc) from None
        return await self._session_update(RunMessages.ASK, request)

    async def answer(self, message_id: str) -> TurnAnswer:
        """The answer to an earlier `ask`, once its turn has ended."""
        try:
            request = FollowRequest(message_id=message_id)
        except ValidationError as exc:
            raise InvalidInput.of("message id", exc) from None
        return await self._session_update(RunMessages.ANSWER, request)

    async def close(self) -> str:
        """End a session once its turn in flight (and the messages queued before) are answered.
        Safe to send again (after a close whose answer was lost): a session that has ended DONE
        says so; one that ended otherwise (FAILED, cancelled, ...) refuses, naming how."""
        try:
            return await self._session_update(RunMessages.CLOSE, None, str)
        except SessionEnded as closed:
            if closed.status != WorkflowExecutionStatus.COMPLETED.name or closed.phase != Phase.DONE:
                raise
            return f"session {self.workflow_id} has ended {ended(closed.phase, closed.status)}"

    async def pause(self) -> None:
        await self._ask(RunMessages.PAUSE, self._handle.signal(RunMessages.PAUSE))

    async def resume(self) -> None:
        await self._ask(RunMessages.RESUME, self._handle.signal(RunMessages.RESUME))

    async def cancel(self) -> None:
        """The running step is cancelled and the run ends under its failure policy. RunClosed if
        the run has ended (the service would take the request and do nothing)."""
        await self._running_or_closed("cancel")
        await self._ask("cancel", self._handle.cancel())

    async def terminate(self, reason: str) -> None:
        """End the run at once: no step boundary, no failure policy, no rollback (`cancel` does
        those). For runs that are stuck or no longer wanted at any price. RunClosed if it has ended."""
        await self._running_or_closed("terminate")
        await self._ask("terminate", self._handle.terminate(reason=reason))

    async def rollback_plan(self, checkpoint_id: str) -> list[RollbackPlanItem]:
        """What a rollback to the checkpoint would undo, newest first, archived effects included;
        running or closed (a closed run's plan comes from its dry-run RollbackWorkflow)."""
        if await self.running():
            try:
                return await self._running_plan(checkpoint_id)
            except RunClosed:
                pass
            except (RunNotFound, Refused):
                raise
            except RatchetError:
                if await self.running():
                    raise
        return (await self._rollback_closed(checkpoint_id, dry_run=True)).plan

    async def rollback(
        self,
        checkpoint_id: str,
        then: Literal["continue", "stop"] | None = None,
        dry_run: bool = False,
    ) -> RollbackOutcome:
        """Undo the effects after `checkpoint_id`, newest first, each at most once. A running run
        interrupts its step and rolls back (`then`: go on from the checkpoint, the default, or
        stop); a closed one (DONE, FAILED, cancelled, ...) through a RollbackWorkflow under the id
        derived from the request, so one that completed before is not run again: its result comes
        back (`earlier`); `then` does not apply to it."""
        try:
            request = RollbackRequest(checkpoint_id=checkpoint_id, then=then or "continue")
        except ValidationError as exc:
            raise InvalidInput.of("rollback", exc) from None
        if await self.running():
            try:
                plan = await self._running_plan(checkpoint_id)
                if dry_run:
                    return RollbackOutcome(
                        workflow_id=self.workflow_id,
                        checkpoint_id=checkpoint_id,
                        running=True,
                        plan=plan,
                        turns_removed=turns_after(await self.state(), checkpoint_id),
                    )
                report = await self._update(RunMessages.ROLLBACK, request, RollbackReport)
                return RollbackOutcome(
                    workflow_id=self.workflow_id,
                    checkpoint_id=checkpoint_id,
                    running=True,
                    plan=plan,
                    report=report,
                    turns_removed=report.turns_removed,
                )
            except RunClosed:
                outcome = await self._rollback_closed(checkpoint_id, dry_run)
                return outcome.model_copy(update={"closed_meanwhile": True})
            except (RunNotFound, Refused):
                raise
            except RatchetError:
                if await self.running():
                    raise
                outcome = await self._rollback_closed(checkpoint_id, dry_run)
                return outcome.model_copy(update={"closed_meanwhile": True})
        return await self._rollback_closed(checkpoint_id, dry_run)

    def stream(self, from_offset: int = 0, topics: Iterable[str] | None = None) -> AsyncIterator[RunEvent]:
        """The run's events (ratchet/contracts/events.py) from `from_offset` on, as they happen,
        until the run closes; topics: `tokens`, `steps`, `answer` (default: all). Resume after a
        disconnect from the last event's `offset + 1`. ratchet/client/stream.py."""
        return stream.events(self, from_offset, topics)

    async def stream_end(self) -> int:
        """The offset the next event of the run's stream will have (to read only what comes next)."""
        return await stream.end_of(self)

    async def open_stream(
        self, from_offset: int = 0, topics: Iterable[str] | None = None, shared: bool = False
    ) -> AsyncIterator[RunEvent]:
        """`stream`, with its errors (RunNotFound, InvalidInput) raised here rather than at the first
        event. `shared`: read through the client's one reader of the run (ratchet/client/shared_stream.py),
        for a server whose readers come and go (a page's live view): a reader that leaves can then
        never leave a poll update in flight on the run beside the one the shared reader has."""
        if shared:
            return await self.client.shared_streams.open(self, from_offset, list(topics or []))
        return await stream.opened(self, from_offset, topics)

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

    # ---- inside ------------------------------------------------------------------------------

    def _by(self, by: str | None) -> str:
        """Who a decision is recorded as made by: `by`, else the Temporal client's identity (`pid@host`)."""
        return (by or self.client.temporal.identity or "person")[:200]

    async def _ask(self, what: str, call: Awaitable[T]) -> T:
        try:
            return await call
        except WorkflowQueryFailedError as exc:
            raise Refused(what, str(exc)) from None
        except WorkflowUpdateRPCTimeoutOrCancelledError:
            raise Unavailable(
                f"{self.workflow_id}: {what}: no result came back in time (the request may stand: send it again; "
                "a session's message with the same id is answered once)"
            ) from None
        except RPCError as exc:
            if lost_connection(exc):  # the service went (it stopped midway): said as when it never answered
                raise rpc_error(self.workflow_id, exc, self.client.address) from None
            if exc.status == RPCStatusCode.NOT_FOUND:
                raise (await self._not_found(what)) from None
            if exc.status in (RPCStatusCode.CANCELLED, RPCStatusCode.DEADLINE_EXCEEDED):
                raise _AskAgain(f"{self.workflow_id}: {what}: no answer in time ({exc})", busy=False) from None
            if exc.status == RPCStatusCode.RESOURCE_EXHAUSTED:
                raise _AskAgain(f"{self.workflow_id}: {what}: the service is busy ({exc})", busy=True) from None
            raise rpc_error(self.workflow_id, exc, self.client.address) from None

    async def _not_found(self, what: str) -> RatchetError:
        """What the service's NOT_FOUND means for the request `what`: a signal, an update or a
        cancel that needs a running run reached one that has closed (RunClosed, saying how), or
        there is no such run (RunNotFound)."""
        if what not in TO_RUNNING:
            return RunNotFound(self.workflow_id)
        description = await self.describe()  # RunNotFound: there is no such run
        if description.status == WorkflowExecutionStatus.RUNNING:  # it continued as new meanwhile
            return Unavailable(
                f"{self.workflow_id}: {what}: the run moved on while the request was on its way; send it again"
            )
        return self._closed(what, description)

    async def _running_or_closed(self, what: str) -> None:
        """Nothing if the run is running; else RunClosed (RunNotFound: no such run)."""
        description = await self.describe()
        if description.status != WorkflowExecutionStatus.RUNNING:
            raise self._closed(what, description)

    def _closed(self, what: str, description: WorkflowExecutionDescription) -> RunClosed:
        """The refusal of `what` by the closed run `description`; of a session, SessionEnded."""
        attributes = description.search_attributes
        phase = (attributes.get("RatchetPhase") or [None])[0]
        status = description.status.name if description.status else "CLOSED"
        closed = SessionEnded if (attributes.get("RatchetSession") or [False])[0] else RunClosed
        return closed(what, self.workflow_id, str(phase) if phase is not None else None, status)

    async def _query(
        self, name: str, *args: Any, result_type: type[T], what: str | None = None, timeout_s: float | None = None
    ) -> T:
        """The query `name`, asked again when no answer came within an attempt's wait: sdk-core drops
        a query it buffered behind a workflow task when that task evicts the run (a worker whose cache
        is full or off logs "There were leftover buffered tasks when evicting run"), and the server then
        waits for an answer that never comes; the query asked again reaches the run as it is now. The
        waits grow (a run that is not cached replays its history to answer); a query the server refuses
        while its buffer of queries is full (the dropped ones hold it) is asked again shortly. `timeout_s`
        (default QUERY_DEADLINE_S) bounds them all; Unavailable past it."""
        what, bound_s = what or name, timeout_s if timeout_s is not None else QUERY_DEADLINE_S
        clock = asyncio.get_running_loop()
        deadline, wait_s = clock.time() + bound_s, QUERY_FIRST_WAIT_S
        while (left_s := deadline - clock.time()) > 0:
            timeout = timedelta(seconds=min(wait_s, left_s))
            try:
                return await self._ask(
                    what, self._handle.query(name, *args, result_type=result_type, rpc_timeout=timeout)
                )
            except _AskAgain as again:
                if again.busy:
                    await asyncio.sleep(min(QUERY_BUSY_PAUSE_S, left_s))
                else:
                    wait_s *= 2
        raise Unavailable(f"{self.workflow_id}: {what}: no worker answered within {bound_s:g} s")

    async def _update(self, name: str, request: BaseModel, result_type: type[T]) -> T:
        try:
            return await self._ask(name, self._handle.execute_update(name, request, result_type=result_type))
        except WorkflowUpdateFailedError as exc:
            raise Refused(name, failure_reason(exc.cause)) from None

    async def _session_update(self, name: str, request: BaseModel | None, result_type: type[Any] = TurnAnswer) -> Any:
        """A session's update; a closed session refuses it, saying how it ended."""
        try:
            call = self._handle.execute_update(
                name, *([request] if request is not None else []), result_type=result_type
            )
            return await self._ask(name, call)
        except WorkflowUpdateFailedError as exc:
            raise Refused(name, failure_reason(exc.cause)) from None
        except RunClosed:
            raise
        except RatchetError:  # the session may have closed while the update was on its way
            description = await self.describe()  # RunNotFound if there is no such run
            if description.status == WorkflowExecutionStatus.RUNNING:
                raise
            raise self._closed(name, description) from None

    async def _running_plan(self, checkpoint_id: str) -> list[RollbackPlanItem]:
        plan = await self._query(
            RunMessages.ROLLBACK_PLAN, checkpoint_id, result_type=list[RollbackPlanItem], what="rollback"
        )
        if any(item.action == "archived" for item in plan):
            plan = await self._with_archived(checkpoint_id)
        return plan

    async def _with_archived(self, checkpoint_id: str) -> list[RollbackPlanItem]:
        """The plan with the effects a long run archived listed one by one, read from the artifact
        store (workflows/effects_archive.py), as the rollback itself will load them."""
        from ratchet.activities.archive import load_archived
        from ratchet.stores.urls import open_artifacts
        from ratchet.workflows import rollback

        state = await self.state()
        store = open_artifacts(self.client.settings.artifact_store_url)
        state.effects.unarchive(await asyncio.to_thread(load_archived, store, state.effects.archive))
        if state.plan is None:  # the run failed while being planned: it never acted
            return []
        try:
            return rollback.plan_of(state, checkpoint_id)
        except ValueError as exc:
            raise Refused("rollback", str(exc)) from None

    async def _rollback_closed(self, checkpoint_id: str, dry_run: bool) -> RollbackOutcome:
        """Start (or join) the closed run's RollbackWorkflow under the id derived from the request."""
        try:
            request = RollbackRun(workflow_id=self.workflow_id, checkpoint_id=checkpoint_id, dry_run=dry_run)
        except ValidationError as exc:
            raise InvalidInput.of("rollback", exc) from None
        rollback_workflow = rollback_id(request.workflow_id, request.checkpoint_id, request.dry_run)
        reuse = WorkflowIDReusePolicy.ALLOW_DUPLICATE if dry_run else WorkflowIDReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY
        earlier = False
        temporal = self.client.temporal
        try:
            handle = await temporal.start_workflow(
                ROLLBACK_WORKFLOW,
                request,
                id=rollback_workflow,
                task_queue=self.client.settings.task_queue,
                result_type=ClosedRollback,
                id_reuse_policy=reuse,
                id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            )
        except WorkflowAlreadyStartedError:
            handle, earlier = temporal.get_workflow_handle(rollback_workflow, result_type=ClosedRollback), True
        except RPCError as exc:
            raise rpc_error(f"cannot roll back {self.workflow_id}", exc, self.client.address) from None
        try:
            closed = await handle.result()
        except RPCError as exc:
            raise rpc_error(f"cannot roll back {self.workflow_id}", exc, self.client.address) from None
        except WorkflowFailureError as exc:
            raise RunFailed(rollback_workflow, failure_reason(exc.cause)) from None
        return RollbackOutcome(
            workflow_id=self.workflow_id,
            checkpoint_id=checkpoint_id,
            running=False,
            plan=closed.plan,
            report=closed.report,
            closed=closed,
            rollback_workflow_id=rollback_workflow,
            earlier=earlier,
        )

    async def _earlier(self, start: int, stop: int, state: AgentState | None = None) -> list[Message]:
        from ratchet.stores import transcripts
        from ratchet.stores.urls import open_artifacts

        state = state or await self.state()
        if state.conversation.transcript is None:
            return []
        store = open_artifacts(self.client.settings.artifact_store_url)
        conversation = await asyncio.to_thread(transcripts.read_all, store, state.conversation.transcript)
        return conversation[start:stop]


TO_RUNNING = frozenset(
    {
        RunMessages.SEND_MESSAGE,
        RunMessages.PAUSE,
        RunMessages.RESUME,
        RunMessages.APPROVE,
        RunMessages.REJECT,
        RunMessages.DECIDE,
        RunMessages.ROLLBACK,
        RunMessages.ASK,
        RunMessages.ANSWER,
        RunMessages.CLOSE,
        "cancel",
        "terminate",
    }
)
"""The requests only a running run takes: on a closed one, RunClosed."""


def start_summary(run: AgentRun) -> str:
    """The run's static summary in the Temporal Web UI: its agent and objective (encrypted as
    payloads are, when the client has codec keys)."""
    objective = run.objective if len(run.objective) <= 200 else run.objective[:199] + "…"
    return f"{run.agent}: {objective}"


def turns_after(state: AgentState, checkpoint_id: str) -> list[int]:
    """A session's turns after the checkpoint's (what a rollback to it removes)."""
    checkpoint = next((c for c in state.effects.checkpoints.items if c.id == checkpoint_id), None)
    turn = checkpoint.turn if checkpoint is not None else 0
    return [t.number for t in state.session.turns.items if t.number > turn and not (turn == 0 and t.number == 1)]


class _AskAgain(Unavailable):
    """An RPC with no answer in time (it may have reached the run) or refused for now (`busy`): a
    query is asked again; an update or a signal is its caller's to send again."""

    def __init__(self, message: str, busy: bool) -> None:
        super().__init__(message)
        self.busy = busy


def validated_run(run: AgentRun | Mapping[str, Any] | str) -> AgentRun:
    """An `AgentRun` from itself, its fields or its JSON; InvalidInput names what is wrong."""
    if isinstance(run, AgentRun):
        return run
    if isinstance(run, str):
        try:
            run = json.loads(run)
        except ValueError as exc:
            raise InvalidInput("run", [f"not JSON: {exc}"]) from None
        if not isinstance(run, Mapping):
            raise InvalidInput("run", [f"must be a JSON object (the run), not {type(run).__name__}"])
    try:
        return AgentRun.model_validate(dict(run))
    except ValidationError as exc:
        raise InvalidInput.of("run", exc) from None
