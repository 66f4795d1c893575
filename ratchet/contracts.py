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


class Strict(BaseModel):
    """Input a person types: unknown fields are mistakes, not extensions."""

    model_config = ConfigDict(extra="forbid")


class Phase(StrEnum):
    STARTING = "STARTING"
    THINKING = "THINKING"
    ACTING = "ACTING"
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


# --- content-addressed artifacts ---------------------------------------------------------------


class ArtifactRef(BaseModel):
    """A blob in the artifact store, named by the sha256 of its bytes."""

    digest: str
    size: int
    media_type: str = "application/octet-stream"


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
    script: list[ScriptedReply] | None = Field(default=None, max_length=100_000)

    @model_validator(mode="after")
    def _script_needs_scripted(self) -> ModelOverride:
        if self.provider == "scripted" and not self.script:
            raise ValueError("provider 'scripted' needs a non-empty 'script'")
        if self.script and self.provider not in (None, "scripted"):
            raise ValueError("'script' is only used with provider 'scripted'")
        return self


class BudgetOverride(Strict):
    max_steps: int | None = Field(default=None, ge=1, le=1_000_000)
    max_tokens: int | None = Field(default=None, ge=1, le=10_000_000_000)
    max_cost_usd: float | None = Field(default=None, ge=0, le=1_000_000)
    max_duration_s: float | None = Field(default=None, gt=0, le=366 * 24 * 3600)


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

    @field_validator("objective")
    @classmethod
    def _no_nul(cls, value: str) -> str:
        if "\x00" in value:
            raise ValueError("must not contain NUL characters")
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


class ToolSpec(BaseModel):
    """What the workflow needs to know about a tool; the JSON schema goes to the artifact store."""

    name: str
    effect: EffectClass = EffectClass.READ_ONLY
    timeout_s: float = 60.0
    max_attempts: int = 5
    idempotent: bool = False


class RunPlan(BaseModel):
    """An `AgentRun` resolved against the worker's profile registry, recorded once per run."""

    agent: str
    system_prompt: str
    model: ModelSettings
    tools: list[ToolSpec]
    tools_ref: ArtifactRef
    budget: Budget
    workspace: str
    max_bad_tool_calls: int = 5


class PrepareRun(BaseModel):
    run: AgentRun
    workflow_id: str


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


class Usage(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class ModelRequest(BaseModel):
    """Only what is new since the previous call; the rest is in the transcript artifact."""

    key: str
    step: int
    transcript_ref: ArtifactRef | None
    new_messages: list[Message]
    tools_ref: ArtifactRef
    settings: ModelSettings


class ModelReply(BaseModel):
    message: Message
    usage: Usage
    finish_reason: str | None = None
    transcript_ref: ArtifactRef
    model: str = ""


# --- tool activities -------------------------------------------------------------------------


class ToolInvocation(BaseModel):
    key: str
    workflow_id: str
    step: int
    call_id: str
    tool: str
    arguments: dict[str, Any]
    workspace: str


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
    transcript_ref: ArtifactRef | None = None
    unsent: int = 0
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    used: BudgetUsed = Field(default_factory=BudgetUsed)
    bad_tool_calls: int = 0
    answer: str | None = None
    last_error: str | None = None


class AgentResult(BaseModel):
    workflow_id: str
    phase: Phase
    answer: str | None
    steps: int
    used: BudgetUsed
    last_error: str | None = None
