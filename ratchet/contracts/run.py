"""What a user sends: the workflow input (`AgentRun`, e.g. from `temporal workflow start --input`)
and the inputs of the workflow's updates and queries. Unknown fields are mistakes (`Strict`).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from ratchet.contracts.base import MAX_OBJECTIVE_CHARS, NAME_PATTERN, FailurePolicy, Strict, valid_unicode


AGENT_WORKFLOW = "AgentWorkflow"
"""The workflow type a run is started as: `temporal workflow start --type AgentWorkflow`."""
STATE_QUERY = "state"
"""The query that returns a run's `AgentState` (`temporal workflow query --name state`)."""


class RunMessages:
    """The names of `AgentWorkflow`'s queries, signals and updates, as `temporal workflow query |
    signal | update execute --name` takes them; the workflow's handlers and `ratchet.client` use
    these, nothing else spells them."""

    STATE = STATE_QUERY
    TRANSCRIPT = "transcript"
    ROLLBACK_PLAN = "rollback_plan"
    SEND_MESSAGE = "send_message"
    PAUSE = "pause"
    RESUME = "resume"
    APPROVE = "approve"
    REJECT = "reject"
    DECIDE = "decide"
    ROLLBACK = "rollback"


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


class ModelOverride(Strict):
    provider: str | None = Field(
        default=None,
        pattern=NAME_PATTERN,
        description="A model provider registered on the worker (`openai` and `scripted` ship).",
    )
    model: str | None = Field(default=None, min_length=1, max_length=200)
    temperature: float | None = Field(default=None, ge=0, le=2)
    max_output_tokens: int | None = Field(default=None, ge=1, le=1_000_000)
    timeout_s: float | None = Field(default=None, gt=0, le=3600)
    context_messages: int | None = Field(
        default=None,
        ge=2,
        le=1_000_000,
        description="Send the model the system prompt, the objective and only the latest this-many messages.",
    )
    stream: bool | None = Field(
        default=None,
        description="Stream the model's replies to the run's stream as they are written (default: the profile's, on).",
    )
    script: list[ScriptedReply] | None = Field(default=None, max_length=100_000)
    script_file: str | None = Field(
        default=None,
        min_length=1,
        max_length=1000,
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
    workspace_host: str | None = Field(
        default=None,
        min_length=1,
        max_length=1000,
        description="Set by `delegate`: the task queue of the host holding the parent's workspace, so a "
        "sub-agent opens the same directory (if that host does not answer, any host opens it).",
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


class RollbackRequest(Strict):
    checkpoint_id: str = Field(min_length=1, max_length=100)
    then: Literal["continue", "stop"] = "continue"


class ApproveRequest(Strict):
    call_id: str = Field(min_length=1, max_length=200)


class RejectRequest(Strict):
    call_id: str = Field(min_length=1, max_length=200)
    reason: str = Field("rejected", max_length=10_000)


class TranscriptPage(Strict):
    offset: int = Field(0, ge=0)
    limit: int = Field(50, ge=1, le=1000)
