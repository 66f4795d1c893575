"""A run's plan: its `AgentRun` resolved against the worker's profile registry by `run.prepare`,
recorded once per run, and what a profile decides for each of its runs (`RunPolicy`).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from ratchet.contracts.approval_policy import ToolPattern
from ratchet.contracts.base import EffectClass, FailurePolicy
from ratchet.contracts.decisions import SignedDecisions
from ratchet.contracts.guardrails import Guardrail
from ratchet.contracts.notify import Notify
from ratchet.contracts.run import AgentRun
from ratchet.contracts.sandbox import SandboxPolicy
from ratchet.contracts.session import SessionPolicy


class Budget(BaseModel):
    max_steps: int = 30
    max_tokens: int = 200_000
    max_cost_usd: float | None = None
    max_duration_s: float | None = None


class ToolSchema(BaseModel):
    """A tool as the model is told of it, in no vendor's format: each provider renders its own wire
    format (OpenAI's function tools, Anthropic's `input_schema`, ...) from it."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    """The arguments' JSON Schema (an object), its properties in the author's order: a reply cut
    off mid-call keeps the first ones (`path` before `content`)."""


class ModelSettings(BaseModel):
    provider: str
    """A `ModelProvider` registered on the worker, by name."""
    model: str
    """The provider's model name (the run's, else the profile's, else the provider's default)."""
    temperature: float | None = None
    max_output_tokens: int | None = None
    timeout_s: float = 120.0
    """One model call's timeout (its activity gets 30 s more, for the transcript around it)."""
    max_attempts: int = Field(8, ge=1)
    """Attempts of a model call (retryable failures: 429, 5xx, timeouts), 1 s apart doubling up to
    `retry_max_interval_s`."""
    retry_max_interval_s: float = Field(60.0, gt=0)
    usd_per_1k_prompt_tokens: float = 0.0
    usd_per_1k_completion_tokens: float = 0.0
    usd_per_1k_cache_read_tokens: float | None = None
    """The price of prompt tokens read from the provider's cache (None: the prompt price)."""
    usd_per_1k_cache_write_tokens: float | None = None
    """The price of prompt tokens written to the provider's cache (None: the prompt price)."""
    priced: bool = True
    """False: no price is known for the model (ratchet/core/prices.py): its calls are billed at $0
    and the run's cost is marked unknown."""
    task_queue: str | None = None
    """The provider's own task queue (RATCHET_MODEL_QUEUES: rate-limited by Temporal); None: the run's."""
    options: dict[str, Any] = Field(default_factory=dict)
    """The provider's own options as it resolved them when the run was planned (`ModelProvider.plan`):
    the scripted provider's script artifact, the anthropic provider's prompt caching."""
    context_messages: int | None = None
    """Send the model the system prompt, the objective and only the latest this-many messages
    (None: the whole conversation). The transcript keeps every message either way."""
    stream: bool = True
    """Publish the reply's text and tool calls to the run's stream while the model writes them
    (where the provider streams); the reply recorded is the same either way."""
    tool_output_chars: int | None = None
    """A tool output longer than this reaches the model as its start and its end, with a note
    naming the artifact that holds all of it (None: all of it)."""


class ModelChoice(BaseModel):
    """A fallback model of a profile: a provider registered on the worker, its model (None: the
    provider's default) and the provider's options."""

    provider: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
    model: str | None = None
    options: dict[str, Any] = Field(default_factory=dict)
    usd_per_1k_prompt_tokens: float | None = None
    """Its prices (None: the profile's)."""
    usd_per_1k_completion_tokens: float | None = None


class ApprovalRule(BaseModel):
    """Ask a person before `tool` runs when argument `argument` matches regex `pattern`
    (no argument: always)."""

    tool: str
    argument: str | None = None
    pattern: str = ".*"


class ToolSpec(BaseModel):
    """What the workflow needs to know about a tool; the JSON schema goes to the artifact store."""

    name: str
    kind: Literal["activity", "timer", "child", "handoff", "plan"] = "activity"
    """`timer` tools (wait) run in the workflow as durable timers; `child` tools (delegate) as
    child workflows; `handoff` swaps the run's profile (workflows/handoffs.py); `plan` (propose_plan) asks a person to
    approve an envelope of calls (workflows/grants.py); the rest as activities."""
    heartbeat_s: float | None = None
    effect: EffectClass = EffectClass.READ_ONLY
    timeout_s: float = 60.0
    max_attempts: int = 5
    has_undo: bool = False
    workspace: bool = False
    """Touches the run's workspace directory: runs on the host that holds it (`AgentState.workspace_host`)."""
    local: bool = False
    """Run as a local activity (in the worker holding the workflow task: no server round trips,
    one marker event). Decided by run.prepare for fast read-only tools (`ratchet.core.tools.runs_locally`);
    recorded in the plan, so replay takes the same path. A workspace tool is tried locally only
    where the workflow's worker is on the workspace's host; elsewhere it answers NotOnThisHost
    without acting and the call goes to the host queue (workflows/acting.py)."""
    mcp: str | None = None
    """The MCP server this tool is on (ratchet/mcp): its calls run as activity `mcp.<server>`."""
    schema_digest: str | None = None
    """The digest of the tool's schema as the model was told of it: a decision's proof covers it
    (`ratchet.contracts.decisions.call_digest`)."""

    @property
    def activity_type(self) -> str:
        """The activity type a call of this tool runs as."""
        return f"mcp.{self.mcp}" if self.mcp else f"tool.{self.name}"


class Verifier(BaseModel):
    """A command whose exit code 0 makes a step a checkpoint (e.g. the project's tests)."""

    argv: list[str]
    timeout_s: float = 300.0


class RunPolicy(BaseModel):
    """What a profile decides for each of its runs; an `AgentProfile` is one, and a `RunPlan`
    carries the profile's values as they were when the run was planned."""

    max_bad_tool_calls: int = 5
    """Invalid tool calls (bad JSON, unknown tool, arguments that fail validation) before the run fails."""
    failure_policy: FailurePolicy = FailurePolicy.ROLLBACK_TO_LAST_CHECKPOINT
    verifier: Verifier | None = None
    """Run after each step with side effects; exit code 0 makes the step a checkpoint."""
    revert_on_failed_verification: bool = False
    """Undo a step's effects when its verification fails (the ratchet: only verified work stays)."""
    allow_irreversible: list[str] = Field(default_factory=list)
    """Irreversible tools this profile may use without approval."""
    approval_rules: list[ApprovalRule] = Field(default_factory=list)
    """Tools (or tool arguments matching a pattern) that wait for a person's approval."""
    auto_approve: list[ToolPattern] = Field(default_factory=list)
    """Calls that run without asking a person although a rule above or irreversibility would ask:
    the first pattern covering a call approves it, recorded as `rule:<pattern>`
    (ratchet/contracts/approval_policy.py). A guardrail's `ask` still asks."""
    approvals: SignedDecisions = Field(default_factory=SignedDecisions)
    """Whether decisions must be signed (`{signed: required}`; docs/SECURITY.md)."""
    approvers: dict[str, list[str]] = Field(default_factory=dict)
    """The roles that may decide on each tool (`{deploy: [ops], "*": [approver]}`; `*`: the tools not
    named). A signed decision in another role is refused; empty: any role."""
    approval_timeout_s: float | None = None
    on_approval_timeout: Literal["reject", "approve", "fail"] = "reject"
    decision_timeout_s: float | None = None
    """How long a call whose outcome is unknown waits for `decide` (None: until someone decides)."""
    on_decision_timeout: Literal["retry", "assume_done", "skip", "fail"] = "fail"
    continue_as_new_events: int = 10_000
    """Continue as new at a step boundary once history has this many events (or Temporal suggests it)."""
    host_timeout_s: float = Field(60.0, gt=0)
    """How long a workspace activity may wait for the host holding the workspace to take it; then the
    host counts as lost and the run fails over (workflows/failover.py)."""
    sandbox: SandboxPolicy = Field(default_factory=SandboxPolicy)
    """Limits, environment and network of the programs the run's tools and verifier run."""
    session: SessionPolicy | None = None
    """Its runs are sessions: after each answer they wait for the next message (a run's `session`
    makes one of any profile)."""
    guardrails: list[Guardrail] = Field(default_factory=list)
    """Checks on the input, each tool call's arguments and the final answer, with what a match does
    (ratchet/contracts/guardrails.py)."""
    handoffs: list[str] = Field(default_factory=list)
    """The profiles the `handoff` tool may hand the run to (ratchet/contracts/handoff.py)."""
    notify: list[Notify] = Field(default_factory=list)
    """Webhooks out: URLs told of the run's events (ratchet/contracts/notify.py)."""
    fallback_after_attempts: int = Field(3, ge=1, le=100)
    """Attempts of a step's model call on a model with a fallback after it (retryable failures: 429,
    5xx, timeouts) before the call moves to the next model (`AgentProfile.fallbacks`)."""


class RunPlan(RunPolicy):
    """An `AgentRun` resolved against the worker's profile registry, recorded once per run."""

    agent: str
    system_prompt: str
    model: ModelSettings
    fallbacks: list[ModelSettings] = Field(default_factory=list)
    """The profile's fallback models, in order: a step whose call keeps failing with retryable errors
    on one (`fallback_after_attempts`) moves to the next, under the same idempotency key."""
    tools: list[ToolSpec]
    budget: Budget
    workspace: str
    search_attributes: bool = True
    local_activities: bool = False
    """The worker may run local activities (RATCHET_LOCAL_TOOLS and a workflow cache): then
    `workspace.open` runs as one, binding the workspace to the host of the workflow's worker, where
    the read-only workspace tools then run locally too (workflows/failover.py)."""
    call_ref: str
    """Digest of the run's `ModelCallConfig` artifact: what every model request of the run shares."""
    mcp_ref: str | None = None
    """Digest of the run's pinned MCP tool list (`ratchet.mcp.catalog.McpCatalog`), named by each of
    its `mcp.<server>` calls; None when the profile uses no MCP server."""

    judges: dict[str, ModelSettings] = Field(default_factory=dict)
    """Each judge guardrail's model, by the guardrail's name."""
    fairness_weight: float | None = None
    """The run's tenant's weight on the worker (RATCHET_TENANT_WEIGHTS), None without a tenant or a
    weight: its activities carry it (ratchet/contracts/tenancy.py)."""
    approver_keys: dict[str, str] = Field(default_factory=dict)
    """The public Ed25519 keys (base64, by key id) a decision's proof may be signed with: the
    worker's RATCHET_APPROVER_KEYS when the run was planned."""
    decision_leeway_s: float = 60.0
    """The clock skew allowed around a proof's `issued_at` and `expires_at` (RATCHET_DECISION_LEEWAY_S)."""
    retired_tools: list[ToolSpec] = Field(default_factory=list)
    """Tools of the profiles the run was handed over from that this one lacks: not offered to the
    model, kept so their effects can still be undone."""

    def tool(self, name: str) -> ToolSpec | None:
        """The tool named `name` the run's effects may have used (retired ones included), or None."""
        return next((t for t in [*self.tools, *self.retired_tools] if t.name == name), None)

    def offered(self, name: str) -> ToolSpec | None:
        """The tool named `name` the model may call now, or None (it asked for one it does not have)."""
        return next((t for t in self.tools if t.name == name), None)


class OutputSpec(BaseModel):
    """A run's output schema, resolved (`ratchet.core.outputs.resolve`): its final answer must be JSON
    matching `json_schema`."""

    name: str
    """The registered output type's name, or the schema's title (`output`)."""
    json_schema: dict[str, Any]


class ModelCallConfig(BaseModel):
    """Constant for a run, so stored once (by run.prepare) rather than sent with every request."""

    settings: ModelSettings
    tools: list[ToolSchema]
    output: OutputSpec | None = None
    """The run's output schema: each final answer is checked against it (activities/model.py)."""
    fallbacks: list[ModelSettings] = Field(default_factory=list)
    """As `RunPlan.fallbacks`: `ModelRequest.choice` 1 is the first."""
    agent: str = ""
    """The run's profile: the billing metrics' `agent` label."""
    shadow: bool = False
    """A shadow run (`ratchet shadow`): its attempts are billed under the cause `shadow`."""
    tenant: str = ""
    """The run's tenant: its attempts are billed to it (the billing ledger's `tenant`)."""
    daily_cap_usd: float | None = None
    """The tenant's cost cap per UTC day (RATCHET_TENANT_DAILY_USD) when the run was planned."""


class PlanRun(BaseModel):
    """Input of `run.prepare`; the run itself is read from the run's start event."""

    workflow_id: str
    chain: str = ""
    """The run chain's first run id: the same across continue-as-new, new when the id is reused."""
    agent: str | None = None
    """A handoff's target: plan the run as if it had been started with this profile."""


class PrepareRun(PlanRun):
    """A run to plan (`RunPreparer.plan`): the start input with the activity's input."""

    run: AgentRun
