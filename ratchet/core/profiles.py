"""Agent profiles: system prompt, model settings, tool set and budget defaults, registered on
the worker. A run names its profile; the worker resolves it once, at the start of the run."""

from __future__ import annotations

from dataclasses import dataclass, field

from typing import Literal

from ratchet.contracts import ApprovalRule, Budget, FailurePolicy, Verifier


@dataclass
class AgentProfile:
    name: str
    system_prompt: str
    tools: list[str]
    model: str | None = None
    """Model name; None means the worker's RATCHET_MODEL."""
    temperature: float | None = None
    context_messages: int | None = None
    """Send the model the system prompt, the objective and only the latest this-many messages
    (None: the whole conversation; a run's `model.context_messages` overrides it)."""
    budget: Budget = field(default_factory=Budget)
    max_bad_tool_calls: int = 5
    usd_per_1k_prompt_tokens: float = 0.0
    usd_per_1k_completion_tokens: float = 0.0
    failure_policy: FailurePolicy = FailurePolicy.ROLLBACK_TO_LAST_CHECKPOINT
    verifier: Verifier | None = None
    """Run after each step with side effects; exit code 0 makes the step a checkpoint."""
    revert_on_failed_verification: bool = False
    """Undo a step's effects when its verification fails (the ratchet: only verified work stays)."""
    allow_irreversible: list[str] = field(default_factory=list)
    """Irreversible tools this profile may use without approval."""
    approval_rules: list[ApprovalRule] = field(default_factory=list)
    """Tools (or tool arguments matching a pattern) that wait for a person's approval."""
    approval_timeout_s: float | None = None
    on_approval_timeout: Literal["reject", "approve", "fail"] = "reject"
    continue_as_new_events: int = 10_000
    """Continue as new at a step boundary once history has this many events (or Temporal suggests it)."""


@dataclass
class ProfileRegistry:
    profiles: dict[str, AgentProfile] = field(default_factory=dict)

    def register(self, profile: AgentProfile) -> AgentProfile:
        self.profiles[profile.name] = profile
        return profile

    def get(self, name: str) -> AgentProfile | None:
        return self.profiles.get(name)


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
)


default_profiles = ProfileRegistry()
default_profiles.register(CODER)
register_profile = default_profiles.register
