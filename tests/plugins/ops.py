"""Test-only tools and profiles for the operations tests (payload size, metrics, logs, shutdown).

Loaded with RATCHET_PLUGINS=tests.plugins.probe,tests.plugins.ops (it uses probe's tools).
"""

from __future__ import annotations

from pydantic import BaseModel, Field

import tests.plugins.probe  # noqa: F401  (probe_wait, probe_fatal)
from ratchet.contracts import ApprovalRule, Budget, FailurePolicy, Verifier
from ratchet.contracts.decisions import SignedDecisions
from ratchet.core.profiles import AgentProfile, register_profile
from ratchet.core.tools import ToolContext, tool
from tests.plugins.probe import BROKEN_MARKER


class BigOutputArgs(BaseModel):
    megabytes: float = Field(gt=0, le=64)


def big_text(megabytes: float) -> str:
    """Numbered lines, `megabytes` MiB in all: the same text for the same size."""
    size = int(megabytes * 1024 * 1024)
    line_count = size // 16 + 1
    return "".join(f"line {i:010d}\n" for i in range(line_count))[:size]


@tool(effect="read_only", timeout_s=60)
def big_output(ctx: ToolContext, args: BigOutputArgs) -> str:
    """Return `megabytes` MiB of text."""
    return big_text(args.megabytes)


register_profile(
    AgentProfile(
        name="bulk",
        system_prompt="You move large data.",
        tools=["big_output", "write_file", "read_file"],
        budget=Budget(max_steps=10, max_tokens=100_000_000),
    )
)

register_profile(
    AgentProfile(
        name="priced",
        system_prompt="You are a test agent with side effects and a price.",
        tools=["write_file", "read_file", "probe_wait", "probe_fatal"],
        budget=Budget(max_steps=20),
        usd_per_1k_prompt_tokens=0.5,
        usd_per_1k_completion_tokens=1.5,
        verifier=Verifier(
            argv=["python", "-c", f"import os,sys; sys.exit(1 if os.path.exists('{BROKEN_MARKER}') else 0)"]
        ),
        failure_policy=FailurePolicy.ROLLBACK_TO_LAST_CHECKPOINT,
    )
)

register_profile(
    AgentProfile(
        name="signed-ops",
        system_prompt="You open tickets; each waits for a signed approval by someone in the ops role.",
        tools=["create_ticket", "wait"],
        budget=Budget(max_steps=10),
        approval_rules=[ApprovalRule(tool="create_ticket")],
        approvals=SignedDecisions(signed="required"),
        approvers={"create_ticket": ["ops"], "*": ["approver"]},
    )
)
register_profile(
    AgentProfile(
        name="signed-ops-handover",
        system_prompt="As signed-ops, continuing as new at every step boundary.",
        tools=["create_ticket", "wait"],
        budget=Budget(max_steps=10),
        approval_rules=[ApprovalRule(tool="create_ticket")],
        approvals=SignedDecisions(signed="required"),
        approvers={"create_ticket": ["ops"]},
        continue_as_new_events=25,
    )
)
