"""Agent profiles: system prompt, model settings, tool set, budget defaults and run policy,
registered on the worker. A run names its profile; the worker resolves it once, at the start of
the run (`run.prepare`), into the run's `RunPlan`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import Field, ValidationError

from ratchet.contracts import (
    NAME_PATTERN,
    ApprovalRule,
    ModelChoice,
    Budget,
    Guardrail,
    BudgetOverride,
    RunPolicy,
    Verifier,
    problems,
)
from ratchet.contracts.mcp import McpToolset

TOOL_OUTPUT_CHARS = 32_000
"""The default `AgentProfile.tool_output_chars`: about 8,000 tokens of one tool output."""


class AgentProfile(RunPolicy):
    """A named agent: what it is told, which tools it has, its model and budget defaults, and
    the `RunPolicy` every run of it gets."""

    name: str
    system_prompt: str
    tools: list[str]
    provider: str | None = Field(None, pattern=NAME_PATTERN)
    """The model provider (`openai`, `anthropic`, or one registered on the worker); None: the worker's
    RATCHET_PROVIDER. A run's `model.provider` overrides it."""
    model: str | None = None
    """The provider's model name; None: the provider's default (OPENAI_MODEL, ANTHROPIC_MODEL). A run's
    `model.model` overrides it; a run that names another provider does not get it."""
    fallbacks: list[ModelChoice] = Field(default_factory=list)
    """Models to move a step's call to, in order, when the one before keeps failing with retryable
    errors (`fallback_after_attempts` attempts); a non-retryable error (a bad request) does not
    fall through. Each must be a provider the worker has and can serve."""
    model_timeout_s: float | None = Field(None, gt=0, le=3600)
    """One model call's timeout; None: the worker's RATCHET_MODEL_TIMEOUT_S (120 s)."""
    model_max_attempts: int | None = Field(None, ge=1, le=100)
    """Attempts of a model call; None: the worker's RATCHET_MODEL_MAX_ATTEMPTS (8)."""
    temperature: float | None = None
    context_messages: int | None = None
    """Send the model the system prompt, the objective and only the latest this-many messages
    (None: the whole conversation; a run's `model.context_messages` overrides it)."""
    stream: bool = True
    """Publish the model's replies to the run's stream as they are written (a run's `model.stream`
    overrides it); off, the stream still carries the steps and the answer."""
    tool_output_chars: int | None = Field(TOOL_OUTPUT_CHARS, ge=1000)
    """A tool output longer than this reaches the model cut to its first three quarters and last
    quarter, with a note naming the artifact that holds all of it; None: the model sees every
    character (one 20 MB output then fails the call on any real model). The transcript keeps what
    the model saw; the run's state a 2 KiB preview and the reference."""
    mcp: list[McpToolset] = Field(default_factory=list)
    """Tools from MCP servers (ratchet/mcp): per server the worker has (RATCHET_MCP_SERVERS), which
    tools the model gets and their effects and compensations. Listed when a run is planned and
    pinned for the run; the model sees them as `<server>__<tool>`."""
    budget: Budget = Field(default_factory=Budget)
    output_schema: dict[str, Any] | str | None = None
    """The final answer's type: a JSON Schema (an object at the top) or the name of a pydantic model
    registered with `register_output_type`; a run's `output_schema` overrides it. None: free text."""
    usd_per_1k_prompt_tokens: float | None = Field(None, ge=0)
    """The profile's own prices (a negotiated price), over the price table's (ratchet/core/prices.py);
    None: the table's for the run's provider and model."""
    usd_per_1k_completion_tokens: float | None = Field(None, ge=0)
    usd_per_1k_cache_read_tokens: float | None = None
    """Prompt tokens read from the provider's cache (Anthropic: a tenth of the prompt price); None:
    the prompt price."""
    usd_per_1k_cache_write_tokens: float | None = None
    """Prompt tokens written to the provider's cache (Anthropic: 1.25 times the prompt price); None:
    the prompt price."""

    def policy(self) -> dict:
        """The `RunPolicy` fields, for the plan of a run of this profile."""
        return {name: getattr(self, name) for name in RunPolicy.model_fields}


@dataclass
class ProfileRegistry:
    profiles: dict[str, AgentProfile] = field(default_factory=dict)

    def register(self, profile: AgentProfile) -> AgentProfile:
        """Add `profile`; the same name with a different profile is an error (two plugins would
        otherwise decide by import order which one a run gets)."""
        existing = self.profiles.get(profile.name)
        if existing is not None and existing != profile:
            raise ValueError(f"agent profile {profile.name!r} is already registered with different settings")
        self.profiles[profile.name] = profile
        return profile

    def get(self, name: str) -> AgentProfile | None:
        return self.profiles.get(name)

    def problems(self) -> list[str]:
        """What is wrong with the registered profiles, one line each naming profile and field
        (empty: all good). A worker refuses to start on any (`RatchetPlugin.run_worker`)."""
        return [
            line for profile in self.profiles.values() for line in budget_problems(profile) + rule_problems(profile)
        ]


def rule_problems(profile: AgentProfile) -> list[str]:
    """An auto-approve rule must name a tool of its profile (a misspelt one would never match)."""
    return [
        f"profile {profile.name!r}: auto_approve[{i}] ({rule.label()}): {rule.tool!r} is not one of its tools"
        for i, rule in enumerate(profile.auto_approve)
        if rule.tool not in profile.tools and not any(rule.tool.startswith(f"{m.server}__") for m in profile.mcp)
    ]


def budget_problems(profile: AgentProfile) -> list[str]:
    """A profile's budget must be one a run could be started with (`BudgetOverride`'s limits):
    `delegate` starts a sub-agent with what is left of it, and a budget over the limits fails
    every such start."""
    budget = {name: getattr(profile.budget, name) for name in BudgetOverride.model_fields}
    try:
        BudgetOverride.model_validate(budget)
    except ValidationError as exc:
        return [f"profile {profile.name!r}: budget.{problem} (a run's limit)" for problem in problems(exc)]
    return []


CODER = AgentProfile(
    name="coder",
    system_prompt=(
        "You are a careful software engineer working in a small repository. "
        "Read the relevant code and run the tests before changing anything. "
        "Make the smallest change that fixes the problem, run the tests again, "
        "and finish with a short summary of what you changed and the test result."
    ),
    tools=["list_files", "read_file", "write_file", "run_command"],
    budget=Budget(max_steps=20, max_tokens=200_000),
    verifier=Verifier(argv=["python", "-m", "unittest"]),
    revert_on_failed_verification=True,
    allow_irreversible=["run_command"],
    guardrails=[  # a key pasted into a request never reaches the model, nor one the model writes the answer
        Guardrail(name="no-secrets-in", on="input", detectors=["secret"], action="redact"),
        Guardrail(name="no-secrets-out", on="answer", detectors=["secret"], action="redact"),
    ],
)


OPS = AgentProfile(
    name="ops",
    system_prompt=(
        "You are an operations assistant. Open tickets in the tracker with create_ticket when the request "
        "asks for one; a ticket for production (its title starts with 'prod') waits for a person's approval, "
        "and a rejection's reason tells you what to change. Use wait to come back later. Finish with a short "
        "summary of the tickets you opened."
    ),
    tools=["create_ticket", "wait"],
    budget=Budget(max_steps=20, max_tokens=200_000),
    approval_rules=[ApprovalRule(tool="create_ticket", argument="title", pattern="^prod")],
    approval_timeout_s=24 * 3600,
    on_approval_timeout="reject",
)
"""A background agent that waits for people: production tickets need an approval (README,
"Background agents"); an unanswered one is rejected after a day."""

default_profiles = ProfileRegistry()
default_profiles.register(CODER)
default_profiles.register(OPS)
register_profile = default_profiles.register
