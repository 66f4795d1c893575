"""Handoffs: an agent hands its task to another profile, in the same run.

A profile that lists `handoff` among its tools and names its targets in `handoffs` may call
`handoff(to, summary, constraints, open_questions)`. The run goes on under the target profile
(workflows/handoffs.py): its instructions, tools and model settings, with the same history,
workspace, checkpoints and budget; the model is given the handoff record as a message (objective,
summary, evidence checkpoints, decisions made, constraints, open questions). The record stays in
`state.handoffs`, with the plan it replaced: a rollback to before the handoff undoes both
profiles' effects newest first and restores that plan. The target may hand back the same way.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from ratchet.contracts.plan import RunPlan


class HandoffArgs(BaseModel):
    """The `handoff` tool's arguments."""

    to: str = Field(min_length=1, description="The profile that takes the task over (one of this agent's handoffs).")
    summary: str = Field(min_length=1, description="Where the task stands: what is done, what is left.")
    constraints: list[str] = Field(default_factory=list, description="What the next agent must respect.")
    open_questions: list[str] = Field(default_factory=list, description="What is still undecided.")


class Handoff(BaseModel):
    """A handoff, as `state.handoffs` keeps it."""

    step: int
    call_id: str
    from_agent: str
    to_agent: str
    objective: str
    summary: str
    evidence: list[str] = Field(default_factory=list)
    """The checkpoints so far, each with its evidence line."""
    decisions: list[str] = Field(default_factory=list)
    """The decisions made on calls so far (approvals, rejections), who made them."""
    constraints: list[str] = Field(default_factory=list)
    open_questions: list[str] = Field(default_factory=list)
    at: str = ""
    messages_len: int
    """The conversation's length before the handoff: a rollback to a checkpoint before it restores `plan_before`."""
    plan_before: RunPlan
    """The plan the handoff replaced."""

    def message(self, system_prompt: str) -> str:
        """What the model is told (a user message: every provider takes one anywhere)."""
        lines = [
            f"[Handoff from {self.from_agent} to {self.to_agent} at step {self.step}]",
            f"You now act as agent {self.to_agent}: {system_prompt}",
            f"Objective: {self.objective}",
            f"Summary: {self.summary}",
        ]
        for title, items in (
            ("Evidence", self.evidence),
            ("Decisions made", self.decisions),
            ("Constraints", self.constraints),
            ("Open questions", self.open_questions),
        ):
            if items:
                lines.append(f"{title}:" + "".join(f"\n- {item}" for item in items))
        return "\n".join(lines)
