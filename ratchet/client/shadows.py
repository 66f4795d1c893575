"""Shadow runs from the client (`RatchetClient.shadows`): what a candidate profile, model or prompt
would have done on recorded runs, every side effect quarantined.

    batch = await client.shadows.start(["coder-1a2b"], Candidate(model="recorded"))
    report = await client.shadows.report(batch)      # ratchet/client/shadow_report.py
    await client.shadows.clean(batch)

`start` reads each original's state (closed or open) and starts, per original, a run of the same
input (or of its checkpoint `from_checkpoint`, through the fork path: `AgentRun.resume_from`) with
the candidate's change, a private workspace holding the original's initial files, the original's
calls that will not run in a shadow with their results (`ShadowOf.recorded`) and its own budget;
the shadow publishes the search attribute `RatchetShadowOf` itself (workflows/visibility.py).
Everything is checked before anything starts: a bad candidate, a query that selects nothing, a
checkpoint a run lacks, a transcript no longer in the artifact store start nothing (InvalidInput).
What only the worker knows (its profiles and providers) is checked by planning the batch's first
shadow before the others start: refused there, it is deleted and the batch stops (InvalidInput with
the worker's reason).
Shadows run on the production task queue and workers: the quarantine is decided in the workflow
(workflows/quarantine.py), from the input.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import Sequence
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel, Field, ValidationError
from temporalio.client import Client

from ratchet.client.errors import InvalidInput, RunFailed, RunNotFound
from ratchet.client.listing import RunFilter, list_runs
from ratchet.client.shadow_clean import clean, delete
from ratchet.client.starting import start_run
from ratchet.contracts import (
    AgentRun,
    AgentState,
    ArtifactRef,
    BudgetOverride,
    ModelOverride,
    ProfileChange,
    RecordedCall,
    ResumeFrom,
    RunAttributes,
    ShadowCleaned,
    ShadowOf,
    canonical,
    runs_in_shadow,
)
from ratchet.ops.settings import Settings
from ratchet.stores.artifacts import ArtifactMissing
from ratchet.stores.urls import open_artifacts

if TYPE_CHECKING:
    from ratchet.client.shadow_report import ShadowReport

RECORDED = "recorded"
"""`Candidate.model` that replays the original's replies (ratchet/models/recorded.py)."""
SHADOW_INFIX = ".shadow-"
"""A shadow's workflow id: `{original}{SHADOW_INFIX}{batch}`."""
_MODEL = re.compile(r"^([A-Za-z0-9][A-Za-z0-9_.-]{0,99}):(.+)$")


class Candidate(BaseModel):
    """The change a batch of shadows tries (`ratchet shadow --profile | --model | --set`)."""

    profile: str | None = Field(default=None, description="Another agent profile of the worker.")
    model: str | None = Field(default=None, description="`recorded`, or `PROVIDER:MODEL`.")
    model_options: dict[str, Any] = Field(default_factory=dict, description="`PROVIDER:MODEL`'s options.")
    bisect: bool = Field(
        default=False,
        description="Replay the recorded replies while `model` (PROVIDER:MODEL) replies the same; stop at the first"
        " step where it does not (ratchet/models/recorded.py).",
    )
    set: dict[str, Any] = Field(default_factory=dict, description="Profile fields changed (`ProfileChange`).")
    from_checkpoint: str | None = Field(default=None, description="Start from this checkpoint of each original.")
    budget_usd: float | None = Field(default=None, description="Each shadow's cost limit (above 0).")


class ShadowPair(BaseModel):
    original: str
    shadow: str


class ShadowBatch(BaseModel):
    """Shadows started together: their batch id and each original with its shadow."""

    id: str
    pairs: list[ShadowPair]


class StateOf(Protocol):
    """What shadows need of a run (a `RunHandle`): its state; a session shadow is also asked its
    original's later questions and closed (ratchet/client/shadow_report.py)."""

    async def state(self, timeout_s: float | None = None) -> AgentState: ...

    async def ask(self, text: str, message_id: str | None = None, wait: bool = True) -> Any: ...

    async def close(self) -> str: ...

    async def planned(self, timeout_s: float = ...) -> bool: ...

    async def running(self) -> bool: ...

    async def terminate(self, reason: str) -> None: ...

    async def closed_state(self) -> AgentState: ...


class Shadows:
    """`RatchetClient.shadows`: start, report and clean shadow runs."""

    def __init__(self, temporal: Client, settings: Settings, get: Callable[[str], StateOf]) -> None:
        self.temporal, self.settings, self.get = temporal, settings, get

    async def listed(self, query: str, limit: int) -> list[str]:
        """The workflow ids a visibility query over Ratchet's runs selects, newest first."""
        return [r.workflow_id for r in await list_runs(self.temporal, RunFilter(query=query), limit)]

    async def select(self, runs: str | Sequence[str], limit: int = 1000) -> list[str]:
        """The originals: workflow ids as given, or those a visibility query selects (shadows left out)."""
        if not isinstance(runs, str):
            if not runs:
                raise InvalidInput("runs", ["no run given"])
            return list(dict.fromkeys(runs))  # each once: a second shadow of a run would collide with the first
        query = f"({runs}) AND {RunAttributes.SHADOW_OF} IS NULL"
        found = await self.listed(query, limit)
        if not found:
            raise InvalidInput("runs", [f"the query selects no run: {runs}"])
        return found

    async def start(
        self, runs: str | Sequence[str], candidate: Candidate, concurrency: int = 4, batch: str | None = None
    ) -> ShadowBatch:
        """One shadow per selected run, all checked before the first starts; at most `concurrency`
        starts at once."""
        change = _checked(candidate, concurrency)
        originals = await self.select(runs)
        batch_id = batch or uuid.uuid4().hex[:8]
        gate = asyncio.Semaphore(concurrency)

        async def read(original: str) -> AgentRun:
            async with gate:
                return await self._shadow_input(original, candidate, change)

        inputs = list(zip(originals, await asyncio.gather(*(read(o) for o in originals))))  # all, before any starts

        async def one(original: str, run: AgentRun) -> ShadowPair:
            async with gate:
                shadow_id = f"{original}{SHADOW_INFIX}{batch_id}"
                await start_run(self.temporal, self.settings, run, shadow_id, False)
                return ShadowPair(original=original, shadow=shadow_id)

        first = await one(*inputs[0])
        await self._planned(first.shadow)  # what only the worker knows stops the batch before the others start
        pairs = [first, *await asyncio.gather(*(one(o, run) for o, run in inputs[1:]))]
        return ShadowBatch(id=batch_id, pairs=pairs)

    async def _planned(self, shadow: str) -> None:
        """Wait until the worker has planned the batch's first shadow: an unknown profile, a provider
        the worker lacks or cannot serve, a profile change that does not validate fail it there. Then
        it is deleted and InvalidInput carries the worker's reason. Not planned in time (no worker
        polls yet): the batch goes on, as a run would wait for one."""
        handle = self.get(shadow)
        try:
            await handle.planned()
        except RunFailed as exc:
            if (await handle.state()).plan is not None:
                return  # planned, then failed (diverged at its first step, say): the report's to tell
            await delete(self.temporal, shadow)
            raise InvalidInput("shadow candidate", [f"the worker cannot run it: {exc.reason}"]) from None

    async def report(self, batch: ShadowBatch | str, wait_s: float = 300) -> ShadowReport:
        """The batch compared with its originals (ratchet/client/shadow_report.py), once every
        shadow has closed or `wait_s` passed (those still running are reported incomplete)."""
        from ratchet.client.shadow_report import build_report

        found = batch if isinstance(batch, ShadowBatch) else await self.find(batch)
        return await build_report(self.get, found, wait_s)

    async def find(self, batch_id: str) -> ShadowBatch:
        """A batch by its id, from visibility."""
        query = f"{RunAttributes.SHADOW_OF} IS NOT NULL"
        suffix = f"{SHADOW_INFIX}{batch_id}"
        ids = await self.listed(query, 10_000)
        pairs = [ShadowPair(original=i[: -len(suffix)], shadow=i) for i in ids if i.endswith(suffix)]
        if not pairs:
            raise InvalidInput("shadow batch", [f"no shadow run of batch {batch_id!r}"])
        return ShadowBatch(id=batch_id, pairs=pairs)

    async def clean(self, batch: ShadowBatch | str, host_timeout_s: float = 30.0) -> list[ShadowCleaned]:
        """Each shadow of the batch terminated if it still runs, its private workspace deleted on
        the hosts that hold it and its ledger entries on the worker side, then its execution
        (history, state, stream): what was deleted of each (ratchet/client/shadow_clean.py). A host
        that does not take its deletion within `host_timeout_s` is gone: `lost` names it."""
        found = batch if isinstance(batch, ShadowBatch) else await self.find(batch)
        shadows = [p.shadow for p in found.pairs]
        return await clean(self.temporal, self.settings.task_queue, self.get, shadows, host_timeout_s)

    async def _shadow_input(self, original: str, candidate: Candidate, change: ProfileChange | None) -> AgentRun:
        try:
            state = await self.get(original).state()
        except RunNotFound:
            raise InvalidInput("runs", [f"{original}: run not found"]) from None
        if state.plan is None:
            raise InvalidInput("runs", [f"{original}: not planned yet, nothing to shadow"])
        resume = self._resume(state, candidate.from_checkpoint)
        model = _candidate_wins(self._model(state, candidate), change)
        budget = state.run.budget or BudgetOverride()
        if candidate.budget_usd is not None:
            budget = budget.model_copy(update={"max_cost_usd": candidate.budget_usd})
        files = self._files(state, resume)
        shadow = ShadowOf(
            workflow_id=original,
            workspace_ref=None if resume else files,
            recorded=_recorded(state),
            profile=change,
        )
        update = {
            "objective": _objective(state, resume),
            "agent": candidate.profile or state.run.agent,
            "model": model,
            "budget": budget,
            "resume_from": resume,
            "workspace": None,
            "workspace_host": None,
            "shadow": shadow,
        }
        try:
            return AgentRun.model_validate({**state.run.model_dump(), **update})
        except ValidationError as exc:
            raise InvalidInput.of("shadow", exc) from None

    def _resume(self, state: AgentState, checkpoint: str | None) -> ResumeFrom | None:
        if checkpoint is None:
            return state.run.resume_from
        known = [c.id for c in state.effects.checkpoints.items]
        if checkpoint not in known:
            has = ", ".join(known) or "none"
            raise InvalidInput("from", [f"{state.workflow_id} has no checkpoint {checkpoint!r} (it has: {has})"])
        return ResumeFrom(workflow_id=state.workflow_id, checkpoint_id=checkpoint)

    def _model(self, state: AgentState, candidate: Candidate) -> ModelOverride | None:
        model = candidate.model
        if model is None:
            return state.run.model
        given = state.run.model or ModelOverride()
        if model != RECORDED and not candidate.bisect:
            provider, name = _MODEL.match(model).groups()  # type: ignore[union-attr]  # checked by _checked
            return given.model_copy(
                update={"provider": provider, "model": name, "options": candidate.model_options or None}
            )
        digest = state.conversation.transcript
        if digest is None:
            raise InvalidInput("model", [f"{state.workflow_id} has no transcript (no model call yet)"])
        self._require_artifact("model", f"{state.workflow_id}: its transcript is", digest)
        options: dict[str, Any] = {"transcript": digest}
        if candidate.bisect:
            provider, name = _MODEL.match(model).groups()  # type: ignore[union-attr]  # checked by _checked
            options["candidate"] = {"provider": provider, "model": name, "options": candidate.model_options}
        return given.model_copy(update={"provider": RECORDED, "model": None, "options": options})

    def _files(self, state: AgentState, resume: ResumeFrom | None) -> ArtifactRef | None:
        """The manifest the shadow's workspace starts from (the original's initial snapshot, or the
        checkpoint's), checked to be still stored."""
        found = state.workspace.snapshot
        if resume is not None and resume.workflow_id == state.workflow_id:
            checkpoint = next(c for c in state.effects.checkpoints.items if c.id == resume.checkpoint_id)
            found = checkpoint.workspace_ref
        if found is not None:
            self._require_artifact("runs", f"{state.workflow_id}: its workspace files are", found.digest)
        return found

    def _require_artifact(self, field: str, what: str, digest: str) -> None:
        store = open_artifacts(self.settings.artifact_store_url)
        try:
            store.get(ArtifactRef.json(digest))
        except (ArtifactMissing, ValueError, OSError) as exc:
            raise InvalidInput(field, [f"{what} no longer stored ({exc})"]) from None


def _checked(candidate: Candidate, concurrency: int) -> ProfileChange | None:
    """The candidate's profile change; InvalidInput for what cannot start a shadow."""
    problems = []
    if candidate.budget_usd is not None and candidate.budget_usd <= 0:
        problems.append(f"budget_usd: must be above 0, not {candidate.budget_usd:g}")
    if candidate.model is not None and candidate.model != RECORDED and not _MODEL.match(candidate.model):
        problems.append(f"model: {candidate.model!r} is neither {RECORDED!r} nor PROVIDER:MODEL")
    if candidate.bisect and (candidate.model is None or candidate.model == RECORDED):
        problems.append("bisect: needs a candidate model, PROVIDER:MODEL")
    if concurrency < 1:
        problems.append(f"concurrency: must be at least 1, not {concurrency}")
    change = None
    try:
        change = ProfileChange.model_validate(candidate.set) if candidate.set else None
    except ValidationError as exc:
        problems += [f"set {p}" for p in InvalidInput.of("profile", exc).problems]
    if problems:
        raise InvalidInput("shadow candidate", problems)
    return change


def _candidate_wins(model: ModelOverride | None, change: ProfileChange | None) -> ModelOverride | None:
    """The original's model override without what the candidate's profile change sets (its
    `temperature`, `context_messages`): a run's override beats its profile, and the candidate is
    what the shadow tries."""
    if model is None or change is None:
        return model
    tried = {name: None for name in ("temperature", "context_messages") if getattr(change, name) is not None}
    return model.model_copy(update=tried)


def _objective(state: AgentState, resume: ResumeFrom | None) -> str:
    """The shadow's first message: the original's objective, or for a session from one of its turn
    checkpoints (`turn-N`) the question of the turn after it."""
    turns = state.session.turns.items
    if resume is None or resume.workflow_id != state.workflow_id or not turns:
        return state.run.objective
    checkpoint = next(c for c in state.effects.checkpoints.items if c.id == resume.checkpoint_id)
    following = next((t for t in turns if t.number == checkpoint.turn + 1), None)
    if following is None:
        raise InvalidInput("from", [f"{state.workflow_id} has no turn after {resume.checkpoint_id}: nothing to shadow"])
    return following.question


def _recorded(state: AgentState) -> list[RecordedCall]:
    """The original's calls of tools that will not run in its shadow, with their results."""
    assert state.plan is not None
    found = []
    for record in state.calls.tool_calls.items:
        spec = state.plan.tool(record.tool)
        if spec is None or runs_in_shadow(spec) or record.shadow is not None:
            continue
        result = record.result
        found.append(
            RecordedCall(
                tool=record.tool,
                arguments=canonical(record.arguments),
                ok=result.ok,
                output=result.output,
                output_ref=result.output_ref,
                error_type=result.error_type,
            )
        )
    return found
