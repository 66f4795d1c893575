"""What a user sends: the workflow input (`AgentRun`, e.g. from `temporal workflow start --input`)
and the inputs of the workflow's updates and queries. Unknown fields are mistakes (`Strict`).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from ratchet.contracts.approval_policy import GrantRequest
from ratchet.contracts.base import Decider, MAX_OBJECTIVE_CHARS, NAME_PATTERN, FailurePolicy, Strict, valid_unicode
from ratchet.contracts.decisions import DecisionProof
from ratchet.contracts.session import SessionOverride
from ratchet.contracts.shadow import ShadowOf
from ratchet.contracts.tenancy import LOWEST_PRIORITY, tenant_problem


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
    ASK = "ask"
    """A session's message, answered by the update's result (`AskRequest` -> `TurnAnswer`)."""
    ANSWER = "answer"
    """The answer to an earlier `ask` by its message id, once its turn has ended."""
    CLOSE = "close"
    """End a session after its turn in flight (and the messages queued before the close)."""
    RESPOND = "respond"
    """A person's answer to a run handed to their inbox (`HandoffResponse`): finish, reply or hand back."""
    MOVE = "move"
    """Signal: a session between turns moves to its worker deployment's build now, if that changed
    (else it would at its next message); `ratchet deploy` sends it to the idle sessions of other
    builds, so the old build drains without waiting for their next message."""


class ModelOverride(Strict):
    provider: str | None = Field(
        default=None,
        pattern=NAME_PATTERN,
        description="A model provider registered on the worker (`openai`, `anthropic` and `scripted` ship).",
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
    options: dict[str, Any] | None = Field(
        default=None,
        description="The provider's own options, checked by the provider when the run is planned "
        "(`scripted`: `script` or `script_file`); needs `provider`.",
    )

    @model_validator(mode="after")
    def _options_need_provider(self) -> ModelOverride:
        if self.options is not None and self.provider is None:
            raise ValueError("'options' are a provider's own: name the 'provider' they are for")
        return self


class BudgetOverride(Strict):
    max_steps: int | None = Field(default=None, ge=1, le=1_000_000)
    max_tokens: int | None = Field(default=None, ge=1, le=10_000_000_000)
    max_cost_usd: float | None = Field(default=None, ge=0, le=1_000_000)
    max_duration_s: float | None = Field(default=None, gt=0, le=366 * 24 * 3600)


class VerifierOverride(Strict):
    """A run's own verifier (e.g. its repository's tests), over its profile's. Taken only when the
    profile runs programs (a tool declared `runs_code`, such as the coder's `run_command`): a run of
    such a profile can have any command run anyway, and any other profile runs none."""

    argv: list[str] = Field(min_length=1, max_length=100, description='The command, e.g. ["pytest", "-q"].')
    timeout_s: float | None = Field(
        default=None, gt=0, le=24 * 3600, description="Its timeout (default: the profile's verifier's, else 300 s)."
    )

    @field_validator("argv")
    @classmethod
    def _plain_words(cls, argv: list[str]) -> list[str]:
        if not argv[0].strip():
            raise ValueError("the program (first word) must not be blank")
        if any("\x00" in word or not valid_unicode(word) or len(word) > 4096 for word in argv):
            raise ValueError("each word must be valid Unicode without NUL characters, at most 4096 characters")
        return argv


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
    output_schema: dict[str, Any] | str | None = Field(
        default=None,
        description="The final answer's type: a JSON Schema (an object at the top), or the name of a pydantic "
        "model registered on the worker; overrides the profile's. The result's `output` holds the answer.",
    )
    on_failure: FailurePolicy | None = Field(default=None, description="Overrides the profile's failure policy.")
    verifier: VerifierOverride | None = Field(
        default=None,
        description="The command whose exit code 0 (with at least one test run) makes a step a checkpoint, over the "
        "profile's; only for a profile that runs programs (`coder`).",
    )
    resume_from: ResumeFrom | None = Field(
        default=None, description="Fork: start from another run's checkpoint (its state and workspace files)."
    )
    memory_scope: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,199}$",
        description="Whose memory the run's `remember`/`recall`/`forget` tools use (e.g. a user id): a run "
        "with the same scope recalls what an earlier one stored.",
    )
    session: SessionOverride | None = Field(
        default=None,
        description="Make the run a session (`{}`: the profile's session settings, or the defaults): after each "
        "answer it waits for the next message (`ratchet ask`), until its idle timeout or `ratchet close`.",
    )
    workspace_host: str | None = Field(
        default=None,
        min_length=1,
        max_length=1000,
        description="Set by `delegate`: the task queue of the host holding the parent's workspace, so a "
        "sub-agent opens the same directory (if that host does not answer, any host opens it).",
    )
    shadow: ShadowOf | None = Field(
        default=None,
        description="Set by `ratchet shadow`: the run is a shadow of another, its side effects quarantined "
        "(ratchet/contracts/shadow.py).",
    )

    tenant: str | None = Field(
        default=None,
        description="Who the run is for (at most 64 bytes): its tasks are dispatched fairly across tenants, by "
        "the tenant's weight (RATCHET_TENANT_WEIGHTS), and its open runs are limited (RATCHET_TENANT_MAX_OPEN); "
        "sub-agents, sessions and continue-as-new keep it (ratchet/contracts/tenancy.py).",
    )
    priority: int | None = Field(
        default=None,
        ge=1,
        le=LOWEST_PRIORITY,
        description="1 (most urgent) to 5 (default 3): the run's tasks are dispatched before those of runs "
        "of a higher number, its model calls before its tools (ratchet/contracts/tenancy.py).",
    )

    @field_validator("tenant")
    @classmethod
    def _tenant(cls, value: str | None) -> str | None:
        problem = tenant_problem(value) if value is not None else None
        if problem:
            raise ValueError(problem)
        return value

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
    then: Literal["continue", "stop", "rerun"] = "continue"
    """After the undo: go on from the checkpoint on the build it runs on, stop (ROLLED_BACK), or
    rerun from the checkpoint on the worker deployment's current build (it continues as new onto
    it: `ratchet deploy rollback --rerun`)."""
    proof: DecisionProof | None = None
    """The signed claim of who rolls back (`rollback:<checkpoint>`, bound to `rollback_digest`)."""


class ApproveRequest(Strict):
    call_id: str = Field(min_length=1, max_length=200)
    by: Decider = "person"
    grant: GrantRequest | None = None
    """Also grant later calls like it for a time (ratchet/contracts/approval_policy.py)."""
    proof: DecisionProof | None = None
    """The signed claim of who approves (`ratchet.contracts.decisions`); required where the profile
    says `approvals: {signed: required}`."""


class RejectRequest(Strict):
    call_id: str = Field(min_length=1, max_length=200)
    reason: str = Field("rejected", max_length=10_000)
    by: Decider = "person"
    proof: DecisionProof | None = None


class TranscriptPage(Strict):
    offset: int = Field(0, ge=0)
    limit: int = Field(50, ge=1, le=1000)
