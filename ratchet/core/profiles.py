"""Agent profiles: system prompt, model settings, tool set, budget defaults and run policy,
registered on the worker. A run names its profile; the worker resolves it once, at the start of
the run (`run.prepare`), into the run's `RunPlan`."""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import Field

from ratchet.contracts import Budget, RunPolicy, Verifier


class AgentProfile(RunPolicy):
    """A named agent: what it is told, which tools it has, its model and budget defaults, and
    the `RunPolicy` every run of it gets."""

    name: str
    system_prompt: str
    tools: list[str]
    model: str | None = None
    """Model name; None means the worker's RATCHET_MODEL."""
    temperature: float | None = None
    context_messages: int | None = None
    """Send the model the system prompt, the objective and only the latest this-many messages
    (None: the whole conversation; a run's `model.context_messages` overrides it)."""
    budget: Budget = Field(default_factory=Budget)
    usd_per_1k_prompt_tokens: float = 0.0
    usd_per_1k_completion_tokens: float = 0.0

    def policy(self) -> dict:
        """The `RunPolicy` fields, for the plan of a run of this profile."""
        return {name: getattr(self, name) for name in RunPolicy.model_fields}


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
