"""Handoffs: an agent hands its task to another profile, in the same run.

A profile that lists `handoff` among its tools and names its targets in `handoffs` may call
`handoff(to, summary, constraints, open_questions)`. The run goes on under the target profile
(workflows/handoffs.py): its instructions, tools and model settings, with the same history,
workspace, checkpoints and budget; the model is given the handoff record as a message (objective,
summary, evidence checkpoints, decisions made, constraints, open questions). The record stays in
`state.handoffs`, with the plan it replaced: a rollback to before the handoff undoes both
profiles' effects newest first and restores that plan. The target may hand back the same way.

A target may also be a person's inbox: `person:NAME` or `role:NAME` (any person of the role) in
the profile's `handoffs`. The record is kept the same way, the run parks in AWAITING_PERSON (the
search attribute `RatchetHandedTo` names the inbox; `ratchet inbox` lists it) until the person
answers with a `HandoffResponse` (the `respond` update): `finish` (their text is the run's answer),
`reply` (a message back to the agent, which goes on) or `hand_back` (to the agent that handed it
over or another of its profile's handoffs, with their notes as the new record's summary).
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, Field, model_validator

from ratchet.contracts.base import Decider, Strict
from ratchet.contracts.plan import RunPlan
from ratchet.contracts.session import MAX_MESSAGE_CHARS

INBOX_PATTERN = r"^(person|role):[A-Za-z0-9][A-Za-z0-9_.@-]{0,99}$"
"""A handoff target that is a person's inbox: `person:alice`, `role:reviewers`."""


def is_inbox(target: str) -> bool:
    """Whether a handoff target names a person or a role (else: a profile)."""
    return target.startswith(("person:", "role:"))


def inbox_problem(target: str) -> str | None:
    """Why a person's or role's target is not one (`person:` with no name, a space), or None."""
    if is_inbox(target) and re.match(INBOX_PATTERN, target) is None:
        return f"{target!r} is not a person's inbox: person:NAME or role:NAME (letters, digits, _.@-)"
    return None


class HandoffResponse(Strict):
    """A person's answer to a run handed to their inbox (the `respond` update)."""

    action: Literal["finish", "reply", "hand_back"]
    """finish: `text` is the run's answer; reply: `text` goes to the agent, which goes on;
    hand_back: the run goes on under profile `to`, `text` its notes (the new record's summary)."""
    text: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS)
    to: str | None = Field(default=None, min_length=1, max_length=100)
    """hand_back only: the profile that takes the task back."""
    constraints: list[str] = Field(default_factory=list)
    open_questions: list[str] = Field(default_factory=list)
    by: Decider = "person"
    at: str = ""
    """When the run took it (set by the workflow)."""

    @model_validator(mode="after")
    def _target(self) -> HandoffResponse:
        if (self.action == "hand_back") != (self.to is not None):
            raise ValueError("to: a hand_back names the profile it hands back to (`to`), and only a hand_back does")
        return self


class HandoffArgs(BaseModel):
    """The `handoff` tool's arguments."""

    to: str = Field(
        min_length=1,
        description="The profile, or a person's inbox (person:NAME, role:NAME), that takes the task over "
        "(one of this agent's handoffs).",
    )
    summary: str = Field(min_length=1, description="Where the task stands: what is done, what is left.")
    constraints: list[str] = Field(default_factory=list, description="What the next agent must respect.")
    open_questions: list[str] = Field(default_factory=list, description="What is still undecided.")


class Handoff(BaseModel):
    """A handoff, as `state.handoffs` keeps it."""

    step: int
    call_id: str = ""
    """The `handoff` call that made it (empty: a person's hand back)."""
    from_agent: str
    """The profile (or the person, `person:NAME`, on a hand back) that handed the task over."""
    to_agent: str
    """The profile, or the person's or role's inbox (`person:alice`, `role:reviewers`), that took it."""
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
    response: HandoffResponse | None = None
    """A person's answer, once they gave it (a handoff to an inbox only)."""
    taken: bool = False
    """The run has taken the person's answer and gone on (or ended with it)."""

    @property
    def waiting(self) -> bool:
        """Handed to a person and not taken back yet: the run is parked (AWAITING_PERSON)."""
        return is_inbox(self.to_agent) and not self.taken

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
