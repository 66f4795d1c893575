"""`delegate`: hand a task to another agent profile as a child AgentWorkflow; `handoff`: hand the
run itself over to another profile (ratchet/contracts/handoff.py); `propose_plan`: an envelope of
calls for a person to approve as one grant (workflows/grants.py).

The workflow runs it (not an activity): the child gets the parent's remaining budget, its spend
is charged to the parent, and the parent records it as an effect whose undo compensates the
child's own effects. Cancelling the parent cancels the child, which compensates itself.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from ratchet.contracts.approval_policy import PlanArgs
from ratchet.contracts.handoff import HandoffArgs
from ratchet.core.tools import ToolContext, tool


class DelegateArgs(BaseModel):
    agent: str = Field(description="Profile of the sub-agent.")
    objective: str = Field(min_length=1, description="What the sub-agent must achieve.")
    max_steps: int | None = Field(None, ge=1, description="Cap on the sub-agent's steps (within the parent's budget).")
    model: dict[str, Any] | None = Field(None, description="Model override for the sub-agent (e.g. a script).")


@tool(kind="child", effect="compensable")
def delegate(ctx: ToolContext, args: DelegateArgs) -> str:
    """Hand a sub-task to another agent and get its answer."""
    raise RuntimeError("delegate runs in the workflow as a child workflow, not as an activity")


@tool(kind="handoff")
def handoff(ctx: ToolContext, args: HandoffArgs) -> str:
    """Hand the whole task over to another agent (one of this agent's handoffs), which goes on in
    this run with everything done so far: say where the task stands, what must be respected, and
    what is still open."""
    raise RuntimeError("handoff runs in the workflow (it changes the run's profile), not as an activity")


@tool(kind="plan")
def propose_plan(ctx: ToolContext, args: PlanArgs) -> str:
    """Propose the calls you mean to make, as patterns (tool and argument tests), before making
    them: a person approves the plan once, and calls within it then run without asking each time;
    a call outside it still waits for a person."""
    raise RuntimeError("propose_plan runs in the workflow (a person approves it), not as an activity")
