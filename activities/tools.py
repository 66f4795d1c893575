"""Tool activities: each registered tool runs as its own activity type `tool.<name>`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pydantic import ValidationError
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.workspace import open_workspace
from ratchet.artifacts import ArtifactStore
from ratchet.contracts import ToolInvocation, ToolResult
from ratchet.tools import FatalToolError, Tool, ToolContext, ToolError, ToolRegistry

INVALID_ARGUMENTS = "InvalidArguments"


class ToolActivities:
    def __init__(self, registry: ToolRegistry, workspace_root: Path, artifacts: ArtifactStore) -> None:
        self.registry = registry
        self.workspace_root = Path(workspace_root)
        self.artifacts = artifacts

    def activities(self) -> list[Callable]:
        return [self._activity_for(tool) for tool in self.registry.tools.values()]

    def _activity_for(self, tool: Tool) -> Callable:
        async def run_tool(inv: ToolInvocation) -> ToolResult:
            return await self.execute(tool, inv)

        run_tool.__name__ = f"tool_{tool.name}"
        return activity.defn(name=f"tool.{tool.name}")(run_tool)

    async def execute(self, tool: Tool, inv: ToolInvocation) -> ToolResult:
        try:
            args = tool.args_model.model_validate(inv.arguments)
        except ValidationError as exc:
            return ToolResult(ok=False, output=_validation_message(tool.name, exc), error_type=INVALID_ARGUMENTS)
        try:
            ctx = self._context(inv)
            out = await tool.call(ctx, args)
        except ToolError as exc:
            return ToolResult(ok=False, output=f"{tool.name} failed: {exc}", error_type="ToolError")
        except FatalToolError as exc:
            raise ApplicationError(f"{tool.name}: {exc}", type="FatalToolError", non_retryable=True) from exc
        return ToolResult(ok=True, output=out.output, undo=out.undo)

    def _context(self, inv: ToolInvocation) -> ToolContext:
        info = activity.info()
        return ToolContext(
            key=inv.key,
            workflow_id=inv.workflow_id,
            step=inv.step,
            call_id=inv.call_id,
            attempt=info.attempt,
            workspace=open_workspace(self.workspace_root, inv.workspace),
            artifacts=self.artifacts,
        )


def _validation_message(name: str, exc: ValidationError) -> str:
    problems = "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or '(arguments)'}: {err['msg']}" for err in exc.errors()
    )
    return f"invalid arguments for {name}: {problems}"
