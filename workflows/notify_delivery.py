"""RatchetNotify: one webhook delivery (workflows/notify.py starts it; deterministic, no I/O).

One activity, `notify.send` (activities/notify.py), retried until the receiver takes the event or
refuses it for good, within the workflow's execution timeout (a day). A failed delivery is a failed
`RatchetNotify` workflow, listed and inspectable as any (`temporal workflow list --query
'WorkflowType="RatchetNotify" AND ExecutionStatus="Failed"'`), its input the whole delivery.
"""

from __future__ import annotations

from temporalio import workflow

from ratchet.contracts import NOTIFY_WORKFLOW, NotifyDelivery
from ratchet.contracts.activities import NOTIFY_SEND
from . import calls


@workflow.defn(name=NOTIFY_WORKFLOW, sandboxed=False)  # outside the SDK's sandbox, as AgentWorkflow
class NotifyWorkflow:
    @workflow.run
    async def run(self, delivery: NotifyDelivery) -> str:
        return await calls.call(NOTIFY_SEND, delivery, summary=f"{delivery.body.event} -> receiver")
