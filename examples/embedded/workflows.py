"""The application's own workflow, which runs on the same worker as Ratchet's `AgentWorkflow`."""

from __future__ import annotations

from temporalio import workflow


@workflow.defn
class ReleaseNotes:
    """Sandboxed, as the SDK's default; its module may import Ratchet (the plugin passes it through)."""

    @workflow.run
    async def run(self, version: str) -> str:
        return f"release notes for {version}: ready"
