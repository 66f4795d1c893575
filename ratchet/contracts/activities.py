"""Every activity Ratchet declares by name, once: its name, input and result types, and default
options. The workflow schedules them through `ratchet.workflows.calls.call`, the activities are
defined with `@activity.defn(name=X.name)`; nothing else spells a name. (The per-tool activities
are named by their tool: `tool.<name>`, `undo.<name>`, `mcp.<server>`: `ToolSpec.activity_type`.)

Data only (the standard library and the contracts): the workflow side turns `Retry` into
Temporal's RetryPolicy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ratchet.contracts.payloads import (
    CompactReply,
    CompactRequest,
    LoadCheckpoint,
    Message,
    ModelReply,
    ModelRequest,
    OpenWorkspace,
    RehydrateWorkspace,
    UndoInvocation,
    VerifyRequest,
    VerifyResult,
    WorkspaceBinding,
)
from ratchet.contracts.deploy import EvaluateGuard, Evaluation, Route
from ratchet.contracts.schedules import Deliver
from ratchet.contracts.notify import NotifyDelivery
from ratchet.contracts.judging import JudgeRequest, JudgeVerdict
from ratchet.contracts.plan import PlanRun, RunPlan
from ratchet.contracts.rollback import ClosedRun, LoadClosedRun
from ratchet.contracts.records import Effect, Forked
from ratchet.contracts.shadow import ForgetRun, RemoveWorkspace
from ratchet.contracts.state import ArchiveEffects, TranscriptSlice

I = TypeVar("I")
R = TypeVar("R")


@dataclass(frozen=True)
class Retry:
    """A retry policy as data: `initial_s`, doubling up to `maximum_s`, at most `maximum_attempts`
    (0: unlimited)."""

    initial_s: float = 1.0
    maximum_s: float | None = None
    maximum_attempts: int = 0


@dataclass(frozen=True)
class ActivityDef(Generic[I, R]):
    name: str
    input: Any
    result: Any
    start_to_close_s: float
    retry: Retry
    heartbeat_s: float | None = None
    """Its heartbeat timeout: it heartbeats well within it (activities/heartbeat.py), so a dead
    worker is noticed then, and a cancellation reaches it."""
    model_path: bool = False
    """A call of a model, or the planning a run's first model call waits for: dispatched before the
    run's other tasks (ratchet/contracts/tenancy.py)."""


ABOUT_A_MINUTE = Retry(initial_s=1.0, maximum_s=10.0, maximum_attempts=10)
"""About a minute of attempts: an outage of the ledger or the artifact store is waited out."""
HEARTBEAT_S = 20.0
"""For the activities that heartbeat every 5 s: a dead worker (a lost host) is noticed in 20 s."""

MODEL_RETRY = Retry(initial_s=1.0, maximum_s=60.0, maximum_attempts=8)
"""A model call's, and a compaction's (a model call too), unless the run's `ModelSettings` say otherwise."""

PREPARE = ActivityDef[PlanRun, RunPlan]("run.prepare", PlanRun, RunPlan, 30.0, ABOUT_A_MINUTE, model_path=True)
MODEL_CALL = ActivityDef[ModelRequest, ModelReply](
    "model.call",
    ModelRequest,
    ModelReply,
    150.0,
    MODEL_RETRY,
    HEARTBEAT_S,
    model_path=True,
)
"""Its timeout and attempts come from the run's `ModelSettings` (the operator's settings, the profile)."""
COMPACT = ActivityDef[CompactRequest, CompactReply](
    "model.compact",
    CompactRequest,
    CompactReply,
    150.0,
    MODEL_RETRY,
    HEARTBEAT_S,
    model_path=True,
)
"""A session's compaction: one summarising model call (workflows/compaction.py); the model call's options."""
VERIFY = ActivityDef[VerifyRequest, VerifyResult](
    "checkpoint.verify",
    VerifyRequest,
    VerifyResult,
    360.0,
    ABOUT_A_MINUTE,
    HEARTBEAT_S,
)
"""Its timeout is the verifier's plus a minute (the manifest goes to the artifact store)."""
FORK = ActivityDef[LoadCheckpoint, Forked]("checkpoint.fork", LoadCheckpoint, Forked, 300.0, Retry(maximum_attempts=5))
WORKSPACE_OPEN = ActivityDef[OpenWorkspace, WorkspaceBinding](
    "workspace.open",
    OpenWorkspace,
    WorkspaceBinding,
    300.0,
    ABOUT_A_MINUTE,
    HEARTBEAT_S,
)
WORKSPACE_REHYDRATE = ActivityDef[RehydrateWorkspace, WorkspaceBinding](
    "workspace.rehydrate",
    RehydrateWorkspace,
    WorkspaceBinding,
    300.0,
    ABOUT_A_MINUTE,
    HEARTBEAT_S,
)
EFFECTS_ARCHIVE = ActivityDef[ArchiveEffects, str]("effects.archive", ArchiveEffects, str, 30.0, ABOUT_A_MINUTE)
EFFECTS_LOAD = ActivityDef[str, list[Effect]]("effects.load", str, list[Effect], 60.0, ABOUT_A_MINUTE)
TRANSCRIPT_MESSAGES = ActivityDef[TranscriptSlice, list[Message]](
    "transcript.messages",
    TranscriptSlice,
    list[Message],
    60.0,
    ABOUT_A_MINUTE,
)
ROLLBACK_LOAD = ActivityDef[LoadClosedRun, ClosedRun]("rollback.load", LoadClosedRun, ClosedRun, 60.0, ABOUT_A_MINUTE)
UNDO = ActivityDef[UndoInvocation, str](
    "undo.<tool>",
    UndoInvocation,
    str,
    60.0,
    Retry(initial_s=0.5, maximum_s=10.0, maximum_attempts=10),
    HEARTBEAT_S,
)
"""The options of every `undo.<tool>` activity (the workflow names it by its tool): about a minute
of attempts, so an outage of the ledger or the artifact store (a file's old bytes) is waited out,
not turned into COMPENSATION_FAILED."""

DEPLOY_EVALUATE = ActivityDef[EvaluateGuard, Evaluation](
    "deploy.evaluate", EvaluateGuard, Evaluation, 10.0, Retry(initial_s=1.0, maximum_s=5.0, maximum_attempts=3)
)
"""A deploy guard's evaluation (visibility listings, a few count requests: well under a second): a
few attempts of 10 s each, so a worker lost mid-evaluation delays a rollback by seconds, not a
minute; one that fails is recorded and the next interval evaluates again (workflows/deploy_guard.py)."""
DEPLOY_ROUTE = ActivityDef[Route, str]("deploy.route", Route, str, 60.0, ABOUT_A_MINUTE)
"""A guard's change to its deployment's routing (ramp, end the ramp, promote); a refusal
(`DeploymentError`) is not retried."""
WORKSPACE_REMOVE = ActivityDef[RemoveWorkspace, int](
    "workspace.remove", RemoveWorkspace, int, 300.0, ABOUT_A_MINUTE, HEARTBEAT_S
)
"""A shadow's private workspace deleted on the host holding it (`ratchet shadow clean`): the files removed."""
LEDGER_FORGET = ActivityDef[ForgetRun, int]("ledger.forget", ForgetRun, int, 60.0, ABOUT_A_MINUTE)
"""A deleted shadow's ledger entries and chain (`Ledger.forget`): the entries deleted."""
SCHEDULE_DELIVER = ActivityDef[Deliver, str](
    "schedule.deliver", Deliver, str, 30.0, Retry(initial_s=1.0, maximum_s=60.0, maximum_attempts=20)
)
"""A scheduled message handed to its session (an `ask` that does not wait for the answer): retried
for about a quarter of an hour while the session refuses it (a turn in flight under the `reject`
policy, a move to a new build); a session that has ended or does not exist is not retried."""
NOTIFY_SEND = ActivityDef[NotifyDelivery, str](
    "notify.send", NotifyDelivery, str, 30.0, Retry(initial_s=1.0, maximum_s=300.0, maximum_attempts=0)
)
"""One webhook delivery: a POST of 30 s at most, retried (up to 5 minutes apart) until the receiver
takes it (2xx) or refuses it for good (a 4xx but 408 and 429: not retried), for a day
(`RatchetNotify`'s schedule-to-close)."""
GUARDRAIL_JUDGE = ActivityDef[JudgeRequest, JudgeVerdict](
    "guardrail.judge", JudgeRequest, JudgeVerdict, 150.0, MODEL_RETRY, HEARTBEAT_S, model_path=True
)
"""A judge guardrail's model call: a model call's timeout and retries; a retry after a lost
completion returns the recorded verdict (ledger key `{workflow id}/{step}/judge-{guardrail}-{call}`)."""

ACTIVITIES = (
    PREPARE,
    MODEL_CALL,
    COMPACT,
    VERIFY,
    FORK,
    WORKSPACE_OPEN,
    WORKSPACE_REHYDRATE,
    WORKSPACE_REMOVE,
    LEDGER_FORGET,
    EFFECTS_ARCHIVE,
    EFFECTS_LOAD,
    TRANSCRIPT_MESSAGES,
    ROLLBACK_LOAD,
    DEPLOY_EVALUATE,
    DEPLOY_ROUTE,
    SCHEDULE_DELIVER,
    NOTIFY_SEND,
    GUARDRAIL_JUDGE,
)
