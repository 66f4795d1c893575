"""AgentWorkflow as it was before the search-attributes change, kept to record the history that
proves old runs still replay on today's code (tests/histories/pre-search-attributes.json)."""

from __future__ import annotations

from temporalio import workflow
from temporalio.common import RawValue

from ratchet.workflows.agent import AgentWorkflow

with workflow.unsafe.imports_passed_through():
    from ratchet.contracts import AgentResult


@workflow.defn(name="AgentWorkflow", sandboxed=False)
class PreSearchAttributesAgentWorkflow(AgentWorkflow):
    @workflow.run
    async def run(self, raw: RawValue = None) -> AgentResult:  # type: ignore[assignment]
        return await super().run(raw)

    def _search_attributes_patch(self) -> bool:
        return False  # the old code never called workflow.patched
