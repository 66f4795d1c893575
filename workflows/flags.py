"""RatchetFlag: a person's flag on a run's outcome, kept as a marker workflow (deterministic, no I/O).

Runs are mostly closed when someone finds their answer wrong, and a closed workflow takes no signal
or update, nor a change to its search attributes or memo. So a flag is a workflow of its own, which
completes at once: its id is `flag_id(run, reason)` (the same flag twice is one), its input and
result the `FlagRecord` (run, reason, who), and its search attributes the flagged run's build
(`RatchetBuildId`) and agent (`RatchetAgent`), set by whoever starts it
(ratchet/deploys/guarding.py, `flag`). The deploy guard counts them per build in its window with a
visibility query (`WorkflowType="RatchetFlag" AND RatchetBuildId="v2"`), as it counts runs:
visibility is the one place closed runs and their flags can be read together, cheaply, and the
flags stay listable and auditable (`temporal workflow list --query 'WorkflowType="RatchetFlag"'`)
for as long as the namespace retains closed workflows.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.common import RawValue

from ratchet.contracts import FLAG_WORKFLOW, FlagRecord
from .input import validated

EXAMPLE = '{"run_id": "fix-42", "reason": "wrong answer", "by": "ana"}'


@workflow.defn(name=FLAG_WORKFLOW, sandboxed=False)  # outside the SDK's sandbox, as AgentWorkflow
class FlagWorkflow:
    @workflow.run
    async def run(self, raw: RawValue = None) -> FlagRecord:  # type: ignore[assignment]  # None: no input
        return validated(raw, FlagRecord, EXAMPLE, "flag")
