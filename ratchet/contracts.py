"""The data that crosses Temporal boundaries: workflow input, activity inputs and outputs, state.

Only pydantic and the standard library are imported here, so the workflow sandbox can import
this module without dragging in openai, httpx, sqlite3 or the filesystem.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$"
MAX_OBJECTIVE_CHARS = 200_000


def valid_unicode(text: str) -> bool:
    """False for strings JSON can carry but UTF-8 cannot (lone surrogates such as "\\ud800")."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def scrub_text(text: str) -> str:
    """NUL characters dropped and lone surrogates replaced, so the text always serializes."""
    return text.replace("\x00", "").encode("utf-8", "replace").decode("utf-8")


class Strict(BaseModel):
    """Input a person types: unknown fields are mistakes, not extensions."""

    model_config = ConfigDict(extra="forbid")


class Phase(StrEnum):
    STARTING = "STARTING"
    THINKING = "THINKING"
    ACTING = "ACTING"
    AWAITING_APPROVAL = "AWAITING_APPROVAL"
    PAUSED = "PAUSED"
    ROLLING_BACK = "ROLLING_BACK"
    DONE = "DONE"
    FAILED = "FAILED"
    BUDGET_EXHAUSTED = "BUDGET_EXHAUSTED"
    CANCELLED = "CANCELLED"
    ROLLED_BACK = "ROLLED_BACK"
    COMPENSATION_FAILED = "COMPENSATION_FAILED"

    @property
    def terminal(self) -> bool:
        return self in TERMINAL_PHASES


TERMINAL_PHASES = frozenset(
    {
        Phase.DONE,
        Phase.FAILED,
        Phase.BUDGET_EXHAUSTED,
        Phase.CANCELLED,
        Phase.ROLLED_BACK,
        Phase.COMPENSATION_FAILED,
    }
)


class EffectClass(StrEnum):
    READ_ONLY = "read_only"
    COMPENSABLE = "compensable"
    IRREVERSIBLE = "irreversible"


class FailurePolicy(StrEnum):
    """What a run does with its side effects when it fails or is cancelled."""

    ROLLBACK_TO_LAST_CHECKPOINT = "rollback_to_last_checkpoint"
    ROLLBACK_ALL = "rollback_all"
    KEEP = "keep"


# --- content-addressed artifacts ---------------------------------------------------------------


class ArtifactRef(BaseModel):
    """A blob in the artifact store, named by the sha256 of its bytes."""

    digest: str
    size: int | None = None
    """None when only the digest travelled (transcripts, a run's model call config)."""
    media_type: str = "application/octet-stream"

    @classmethod
    def json(cls, digest: str) -> ArtifactRef:
        return cls(digest=digest, media_type="application/json")


# --- the scripted provider's script ----------------------------------------------------------


class ScriptedToolCall(Strict):
    name: str
    arguments: dict[str, Any] | str = Field(
        default_factory=dict, description="JSON object, or a raw string sent verbatim (to test bad JSON)."
    )
    id: str | None = None


class ScriptedReply(Strict):
    """One model turn: tool calls, or a final answer in `content`."""

    tool_calls: list[ScriptedToolCall] = Field(default_factory=list)
    content: str | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> ScriptedReply:
        if not self.tool_calls and self.content is None:
            raise ValueError("a scripted reply needs tool_calls or content")
        return self


# --- what a user sends -----------------------------------------------------------------------


class ModelOverride(Strict):
    provider: Literal["openai", "scripted"] | None = None
    model: str | None = Field(default=None, min_length=1, max_length=200)
    temperature: float | None = Field(default=None, ge=0, le=2)
    max_output_tokens: int | None = Field(default=None, ge=1, le=1_000_000)
    timeout_s: float | None = Field(default=None, gt=0, le=3600)
    context_messages: int | None = Field(
        default=None, ge=2, le=1_000_000,
        description="Send the model the system prompt, the objective and only the latest this-many messages.",
    )
    script: list[ScriptedReply] | None = Field(default=None, max_length=100_000)
    script_file: str | None = Field(
        default=None, min_length=1, max_length=1000,
        description="A JSON file of scripted replies in the run's workspace, read once when the run is planned.",
    )

    @model_validator(mode="after")
    def _script_needs_scripted(self) -> ModelOverride:
        if self.script and self.script_file:
            raise ValueError("give 'script' or 'script_file', not both")
        scripted = self.script or self.script_file
        if self.provider == "scripted" and not scripted:
            raise ValueError("provider 'scripted' needs a non-empty 'script' (or a 'script_file')")
        if scripted and self.provider not in (None, "scripted"):
            raise ValueError("'script' and 'script_file' are only used with provider 'scripted'")
        return self


class BudgetOverride(Strict):
    max_steps: int | None = Field(default=None, ge=1, le=1_000_000)
    max_tokens: int | None = Field(default=None, ge=1, le=10_000_000_000)
    max_cost_usd: float | None = Field(default=None, ge=0, le=1_000_000)
    max_duration_s: float | None = Field(default=None, gt=0, le=366 * 24 * 3600)


class ResumeFrom(Strict):
    workflow_id: str = Field(min_length=1, max_length=1000)
    checkpoint_id: str = Field(min_length=1, max_length=100)


class AgentRun(Strict):
    """What a user sends, e.g. `temporal workflow start --input '{"agent": "coder", ...}'`."""

    agent: str = Field(pattern=NAME_PATTERN, description="Agent profile name registered on the worker.")
    objective: str = Field(min_length=1, max_length=MAX_OBJECTIVE_CHARS)
    workspace: str | None = Field(
        default=None,
        pattern=NAME_PATTERN,
        description="Directory under the worker's workspace root; defaults to the workflow id.",
    )
    model: ModelOverride | None = None
    budget: BudgetOverride | None = None
    on_failure: FailurePolicy | None = Field(default=None, description="Overrides the profile's failure policy.")
    resume_from: ResumeFrom | None = Field(
        default=None, description="Fork: start from another run's checkpoint (its state and workspace files)."
    )

    @field_validator("objective")
    @classmethod
    def _no_nul(cls, value: str) -> str:
        if "\x00" in value:
            raise ValueError("must not contain NUL characters")
        if not valid_unicode(value):
            raise ValueError("must be valid Unicode (it contains a lone surrogate)")
        if not value.strip():
            raise ValueError("must not be blank")
        return value


# --- resolved run plan (from the worker's profile registry) ----------------------------------


class Budget(BaseModel):
    max_steps: int = 30
    max_tokens: int = 200_000
    max_cost_usd: float | None = None
    max_duration_s: float | None = None


class ModelSettings(BaseModel):
    provider: Literal["openai", "scripted"] = "openai"
    model: str = "gpt-4o-mini"
    temperature: float | None = None
    max_output_tokens: int | None = None
    timeout_s: float = 120.0
    usd_per_1k_prompt_tokens: float = 0.0
    usd_per_1k_completion_tokens: float = 0.0
    script_ref: ArtifactRef | None = None
    context_messages: int | None = None
    """Send the model the system prompt, the objective and only the latest this-many messages
    (None: the whole conversation). The transcript keeps every message either way."""


class ApprovalRule(BaseModel):
    """Ask a person before `tool` runs when argument `argument` matches regex `pattern`
    (no argument: always)."""

    tool: str
    argument: str | None = None
    pattern: str = ".*"


class ToolSpec(BaseModel):
    """What the workflow needs to know about a tool; the JSON schema goes to the artifact store."""

    name: str
    kind: Literal["activity", "timer", "child"] = "activity"
    """`timer` tools (wait) run in the workflow as durable timers; `child` tools (delegate) as
    child workflows; the rest as activities."""
    heartbeat_s: float | None = None
    effect: EffectClass = EffectClass.READ_ONLY
    timeout_s: float = 60.0
    max_attempts: int = 5
    has_undo: bool = False
    local: bool = False
    """Run as a local activity (in the worker holding the workflow task: no server round trips,
    one marker event). Decided by run.prepare for fast read-only tools (`ratchet.core.tools.runs_locally`);
    recorded in the plan, so replay takes the same path."""


class Verifier(BaseModel):
    """A command whose exit code 0 makes a step a checkpoint (e.g. the project's tests)."""

    argv: list[str]
    timeout_s: float = 300.0


class RunPlan(BaseModel):
    """An `AgentRun` resolved against the worker's profile registry, recorded once per run."""

    agent: str
    system_prompt: str
    model: ModelSettings
    tools: list[ToolSpec]
    budget: Budget
    workspace: str
    max_bad_tool_calls: int = 5
    failure_policy: FailurePolicy = FailurePolicy.ROLLBACK_TO_LAST_CHECKPOINT
    verifier: Verifier | None = None
    revert_on_failed_verification: bool = False
    allow_irreversible: list[str] = Field(default_factory=list)
    approval_rules: list[ApprovalRule] = Field(default_factory=list)
    approval_timeout_s: float | None = None
    on_approval_timeout: Literal["reject", "approve", "fail"] = "reject"
    continue_as_new_events: int = 10_000
    search_attributes: bool = True
    call_ref: str
    """Digest of the run's `ModelCallConfig` artifact: what every model request of the run shares."""


class ModelCallConfig(BaseModel):
    """Constant for a run, so stored once (by run.prepare) rather than sent with every request."""

    settings: ModelSettings
    tools: list[dict[str, Any]]


class PrepareRun(BaseModel):
    run: AgentRun
    workflow_id: str
    chain: str = ""
    """The run chain's first run id: the same across continue-as-new, new when the id is reused."""


# --- model activity --------------------------------------------------------------------------


class ToolCallRequest(BaseModel):
    """A tool call as the model wrote it; `arguments` is the raw JSON text."""

    id: str
    name: str
    arguments: str


class Message(BaseModel):
    role: Literal["system", "user", "assistant", "tool"]
    content: str | None = None
    tool_calls: list[ToolCallRequest] = Field(default_factory=list)
    tool_call_id: str | None = None
    content_ref: ArtifactRef | None = None
    """Full content in the artifact store when `content` is a shortened preview."""
    pinned: bool = False
    """Sent to the model whatever its context window (a fork's objective; the system prompt and the
    run's objective, the first two messages, always are)."""


class Usage(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class ModelRequest(BaseModel):
    """Only what is new since the previous call: the conversation so far is the `transcript`
    artifact, settings and tool schemas the run's `call_ref` artifact (both digests). The
    idempotency key is `{workflow id}/{step}/model`, made by the activity from its own info."""

    step: int
    new_messages: list[Message]
    call_ref: str
    transcript: str | None = None


class ModelReply(BaseModel):
    message: Message
    usage: Usage
    transcript: str
    """Digest of the conversation including this reply."""
    finish_reason: str | None = None
    """Only when the message does not say it: e.g. "length" (output cut at max tokens), not
    "tool_calls" or "stop"."""
    model: str = ""
    """Only when the provider names another model than the run's settings (e.g. a dated snapshot)."""


# --- tool activities -------------------------------------------------------------------------


class ToolInvocation(BaseModel):
    step: int
    call_id: str
    arguments: dict[str, Any]
    workspace: str
    key: str = ""
    workflow_id: str = ""
    tool: str = ""
    """Empty: filled by the tool activity from its own info (workflow id, activity type), the key
    as `{workflow id}/{step}/{call id}`; so history does not repeat them for every call."""


class ToolResult(BaseModel):
    ok: bool
    output: str
    output_ref: ArtifactRef | None = None
    undo: dict[str, Any] | None = None
    error_type: str | None = None


class ToolCallRecord(BaseModel):
    step: int
    call_id: str
    tool: str
    key: str
    arguments: str
    result: ToolResult


# --- effects, undo, checkpoints --------------------------------------------------------------


class EffectStatus(StrEnum):
    PENDING = "pending"
    """Registered; the call is scheduled or its outcome is unknown."""
    DONE = "done"
    FAILED = "failed"
    """The call failed; it may still have taken effect, so its undo runs too."""
    UNDONE = "undone"
    UNDO_FAILED = "undo_failed"
    NOT_UNDONE = "not_undone"
    """Left in place: irreversible, or an older effect behind an undo that failed."""


class Effect(BaseModel):
    tool: str
    step: int
    call_id: str
    key: str
    arguments: dict[str, Any]
    effect: EffectClass
    status: EffectStatus = EffectStatus.PENDING
    undo: dict[str, Any] | None = None
    error: str | None = None


class UndoInvocation(BaseModel):
    key: str
    """The forward call's key; the undo's own key is `{key}/undo`."""
    workflow_id: str
    step: int
    call_id: str
    tool: str
    arguments: dict[str, Any]
    workspace: str
    undo: dict[str, Any] | None


class Evidence(BaseModel):
    argv: list[str]
    exit_code: int
    passed: bool
    tests_run: int | None = None
    tests_failed: int | None = None
    output: str
    output_ref: ArtifactRef | None = None


class VerifyRequest(BaseModel):
    key: str
    workflow_id: str
    workspace: str
    verifier: Verifier
    changed: dict[str, ArtifactRef | None] = Field(
        default_factory=dict, description="Paths written since the last checkpoint -> bytes before (None: absent)."
    )


class VerifyResult(BaseModel):
    evidence: Evidence
    patch_ref: ArtifactRef | None = None
    workspace_ref: ArtifactRef | None = None
    """Manifest {path: ArtifactRef} of every workspace file, for forks."""


class Checkpoint(BaseModel):
    id: str
    step: int
    created_at: str
    effects_len: int
    messages_len: int
    messages: list[Message] | None = None
    """Filled only in a copy taken for a fork (messages `messages_base`..`messages_len`); a live
    run's checkpoint is a prefix of its messages."""
    messages_base: int = 0
    transcript: str | None = None
    unsent: int
    summary: str
    evidence: Evidence | None = None
    patch_ref: ArtifactRef | None = None
    workspace_ref: ArtifactRef | None = None


class RollbackRequest(Strict):
    checkpoint_id: str = Field(min_length=1, max_length=100)
    then: Literal["continue", "stop"] = "continue"


class RollbackReport(BaseModel):
    checkpoint_id: str | None
    reason: str = ""
    undone: list[str] = Field(default_factory=list)
    irreversible: list[str] = Field(default_factory=list)
    """Effects that cannot be undone and were left in place."""
    not_undone: list[str] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not self.not_undone and not self.errors


class LoadCheckpoint(BaseModel):
    workflow_id: str
    checkpoint_id: str
    workspace: str
    """The new run's workspace, which receives the checkpoint's files."""


class RollbackPlanItem(BaseModel):
    tool: str
    step: int
    key: str
    action: Literal["undo", "irreversible", "already_undone"]


# --- approvals, messages, paging -------------------------------------------------------------


class PendingApproval(BaseModel):
    call_id: str
    tool: str
    step: int
    arguments: dict[str, Any]
    requested_at: str
    reason: str


class Decision(BaseModel):
    approved: bool
    reason: str = ""
    by: str = "person"


class ApproveRequest(Strict):
    call_id: str = Field(min_length=1, max_length=200)


class RejectRequest(Strict):
    call_id: str = Field(min_length=1, max_length=200)
    reason: str = Field("rejected", max_length=10_000)


class TranscriptPage(Strict):
    offset: int = Field(0, ge=0)
    limit: int = Field(50, ge=1, le=1000)


class Transcript(BaseModel):
    total: int
    offset: int
    messages: list[Message]


# --- state and result ------------------------------------------------------------------------


class BudgetUsed(BaseModel):
    steps: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    model_calls: int = 0
    tool_calls: int = 0


class AgentState(BaseModel):
    workflow_id: str
    run: AgentRun
    plan: RunPlan | None = None
    phase: Phase = Phase.STARTING
    step: int = 0
    started_at: str | None = None
    messages: list[Message] = Field(default_factory=list)
    """The conversation from message `messages_base` on; the earlier ones were handed over into
    the transcript artifact at a continue-as-new."""
    messages_base: int = 0
    transcript: str | None = None
    """Digest of the conversation as the model last saw it (the first `unsent` messages)."""
    unsent: int = 0
    """Index (counted from the first message of the run, like `messages_len`) of the first message
    the model has not seen."""
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    """The most recent tool calls; `tool_calls_archived` older ones were dropped at handovers
    (their outputs are in the transcript, their side effects in `effects`)."""
    tool_calls_archived: int = 0
    effects: list[Effect] = Field(default_factory=list)
    checkpoints: list[Checkpoint] = Field(default_factory=list)
    rollbacks: list[RollbackReport] = Field(default_factory=list)
    used: BudgetUsed = Field(default_factory=BudgetUsed)
    pending_approvals: list[PendingApproval] = Field(default_factory=list)
    decisions: dict[str, Decision] = Field(default_factory=dict)
    inbox: list[str] = Field(default_factory=list)
    """Messages sent by signal, added to the conversation at the next step boundary."""
    paused: bool = False
    continued: int = 0
    """How many times this run has continued as new."""
    bad_tool_calls: int = 0
    answer: str | None = None
    last_error: str | None = None

    @property
    def message_count(self) -> int:
        """Messages of the run so far, the handed-over ones included (what `unsent` counts in)."""
        return self.messages_base + len(self.messages)


class Continuation(BaseModel):
    """The input of a run that continues as new: the whole state, same workflow id and keys."""

    continuation: AgentState


class AgentResult(BaseModel):
    workflow_id: str
    phase: Phase
    answer: str | None
    steps: int
    used: BudgetUsed
    last_error: str | None = None
    workspace: str | None = None
    effects: list[Effect] = Field(default_factory=list)
    """Side effects left in place (for a parent that must be able to undo this run)."""
