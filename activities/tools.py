"""Tool activities: each registered tool runs as activity type `tool.<name>`, its undo as `undo.<name>`.

Side-effecting calls go through the idempotency ledger (ratchet/stores/ledger.py): a retry after the
side effect was done and recorded returns the recorded result without acting again, and an undo
runs at most once per key. The ledger and the artifact store are synchronous and may be remote, so
their calls run in a thread (`asyncio.to_thread`), not on the worker's event loop; the one
exception is `ToolContext.record_undo`, which a tool calls synchronously.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from temporalio import activity
from temporalio.exceptions import ApplicationError

from . import caller, exactly_once
from .heartbeat import INTERVAL_S, heartbeating, progress
from ratchet.stores.ledger import Ledger
from .workspace import open_workspace, require_host
from ratchet.stores.artifacts import ArtifactStore
from ratchet.contracts import (
    EffectClass,
    ErrorType,
    SandboxPolicy,
    ToolInvocation,
    ToolResult,
    UndoInvocation,
    problems,
)
from ratchet.core.keys import call_key, undo_key
from ratchet.ops.redaction import redacted
from ratchet.ops.settings import Settings
from ratchet.sandbox import Sandbox
from ratchet.core.tools import (
    FatalToolError,
    NotStarted,
    Tool,
    ToolContext,
    ToolError,
    ToolOutput,
    ToolRegistry,
    nul_problem,
)

INLINE_OUTPUT_CHARS = 8 * 1024
PREVIEW_CHARS = 2 * 1024


class ToolActivities:
    def __init__(
        self,
        registry: ToolRegistry,
        workspace_root: Path,
        artifacts: ArtifactStore,
        ledger: Ledger,
        settings: Settings | None = None,
        sandbox: Sandbox | None = None,
    ) -> None:
        self.registry = registry
        self.workspace_root = Path(workspace_root)
        self.artifacts = artifacts
        self.ledger = ledger
        self.settings = settings
        self.sandbox = sandbox
        """Where tools declared `runs_code` run programs (None: they fail, non-retryably)."""
        self.after_record: Callable[[ToolInvocation], None] | None = None
        """Test hook: runs once the ledger holds a side-effecting call's result (recorded now or by an
        earlier attempt), before the activity returns (raising here simulates a worker that died with
        its completion unreported)."""

    def activities(self) -> list[Callable]:
        acts = [self._activity_for(tool) for tool in self.registry.tools.values() if tool.kind == "activity"]
        acts += [self._undo_activity_for(tool) for tool in self.registry.tools.values() if tool.undo]
        return acts

    def _activity_for(self, tool: Tool) -> Callable:
        async def run_tool(inv: ToolInvocation) -> ToolResult:
            require_host(inv.host, self.settings.host_id if self.settings else None)
            timeout = activity.info().heartbeat_timeout
            if not timeout:  # a local activity: cancelled in process, no heartbeat
                return await self.execute(tool, _with_identity(inv, tool.name))
            # the heartbeat carries a cancellation (a rollback, a pause, the run's deadline) to the tool
            async with heartbeating(min(INTERVAL_S, timeout.total_seconds() / 4), activity.info().heartbeat_details):
                return await self.execute(tool, _with_identity(inv, tool.name))

        run_tool.__name__ = f"tool_{tool.name}"
        return activity.defn(name=f"tool.{tool.name}")(run_tool)

    def _undo_activity_for(self, tool: Tool) -> Callable:
        async def run_undo(inv: UndoInvocation) -> str:
            return await self.undo(tool, inv)

        run_undo.__name__ = f"undo_{tool.name}"
        return activity.defn(name=f"undo.{tool.name}")(run_undo)

    async def execute(self, tool: Tool, inv: ToolInvocation) -> ToolResult:
        return await stored(await self._execute(tool, inv), self.artifacts)

    async def _execute(self, tool: Tool, inv: ToolInvocation) -> ToolResult:
        try:
            args = tool.args_model.model_validate(inv.arguments)
        except ValidationError as exc:
            return ToolResult(
                ok=False, output=_validation_message(tool.name, exc), error_type=ErrorType.INVALID_ARGUMENTS
            )
        nul = nul_problem(inv.arguments)
        if nul is not None:
            return ToolResult(
                ok=False, output=f"invalid arguments for {tool.name}: {nul}", error_type=ErrorType.INVALID_ARGUMENTS
            )
        try:
            ctx = self._context(inv.key, inv, tool)
            if tool.effect == EffectClass.READ_ONLY:
                return _result(tool, await tool.call(ctx, args))
            return await self._execute_once(tool, inv, ctx, args)
        except ToolError as exc:
            return ToolResult(ok=False, output=f"{tool.name} failed: {exc}", error_type=ErrorType.TOOL_ERROR)
        except FatalToolError as exc:
            raise ApplicationError(f"{tool.name}: {exc}", type=ErrorType.FATAL_TOOL_ERROR, non_retryable=True) from exc

    async def _execute_once(self, tool: Tool, inv: ToolInvocation, ctx: ToolContext, args: Any) -> ToolResult:
        async def act() -> ToolResult:
            try:
                return _result(tool, await tool.call(ctx, args))
            except ToolError as exc:
                return ToolResult(ok=False, output=f"{tool.name} failed: {exc}", error_type=ErrorType.TOOL_ERROR)

        async def reconcile() -> ToolResult | None:
            found = await tool.call_reconcile(ctx, args)
            return None if found is None else _result(tool, found)

        hook = reconcile if tool.reconcile is not None else None
        call = tool_call(inv, inv.key, tool.name, act, reconcile=hook, idempotent=tool.idempotent)
        try:
            result = await exactly_once.run(self.ledger, call)
        except NotStarted as exc:  # it did not act: the attempt is forgotten, retried as usual
            raise ApplicationError(f"{tool.name} did not start: {exc}", type=ErrorType.NOT_STARTED) from exc
        if self.after_record is not None:
            self.after_record(inv)
        return result

    async def undo(self, tool: Tool, inv: UndoInvocation) -> str:
        async def act(undo_info: dict[str, Any] | None, _forward: Any) -> str:
            args = tool.args_model.model_validate(inv.arguments)
            try:
                async with heartbeating():
                    out = await tool.call_undo(self._context(undo_key(inv.key), inv, tool), args, undo_info)
            except FatalToolError as exc:
                raise ApplicationError(
                    f"undo {tool.name}: {exc}", type=ErrorType.UNDO_FAILED, non_retryable=True
                ) from exc
            return out.output

        return await exactly_once.undo(self.ledger, inv.key, inv.undo, act)

    def _context(self, key: str, inv: ToolInvocation | UndoInvocation, tool: Tool) -> ToolContext:
        return ToolContext(
            key=key,
            workflow_id=inv.workflow_id,
            step=inv.step,
            call_id=inv.call_id,
            attempt=activity.info().attempt,
            workspace=open_workspace(self.workspace_root, inv.workspace),
            artifacts=self.artifacts,
            record_undo=lambda undo: self.ledger.set_undo(key, undo),
            settings=self.settings,
            heartbeat=progress,
            resume_from=(activity.info().heartbeat_details or [None])[0],
            sandbox=self.sandbox if tool.runs_code else None,
            sandbox_policy=inv.sandbox if isinstance(inv, ToolInvocation) else SandboxPolicy(),
            memory_scope=inv.memory_scope if isinstance(inv, ToolInvocation) else None,
        )


def _result(tool: Tool, out: ToolOutput) -> ToolResult:
    return ToolResult(ok=True, output=out.output, undo=out.undo)


def _with_identity(inv: ToolInvocation, tool_name: str) -> ToolInvocation:
    """Fill what the workflow leaves out of history: the workflow id and tool name from the
    activity's info, the key as the workflow computed it for the effect record."""
    if inv.key and inv.workflow_id and inv.tool:
        return inv
    workflow_id = inv.workflow_id or caller.workflow_id()
    return inv.model_copy(
        update={
            "workflow_id": workflow_id,
            "tool": inv.tool or tool_name,
            "key": inv.key or call_key(workflow_id, inv.step, inv.call_id),
        }
    )


async def stored(result: ToolResult, artifacts: ArtifactStore) -> ToolResult:
    """A tool's result as the workflow gets it: secrets out, a long output in the artifact store,
    off the event loop (redacting megabytes takes long enough to starve the heartbeat)."""
    if len(result.output) <= INLINE_OUTPUT_CHARS:
        return redacted(result)
    return await asyncio.to_thread(lambda: offload(redacted(result), artifacts))


def offload(result: ToolResult, artifacts: ArtifactStore) -> ToolResult:
    """Outputs over INLINE_OUTPUT_CHARS go to the artifact store; history keeps a preview + ref."""
    if len(result.output) <= INLINE_OUTPUT_CHARS:
        return result
    ref = artifacts.put(result.output.encode(), "text/plain")
    preview = (
        result.output[:PREVIEW_CHARS]
        + f"\n... ({len(result.output)} characters; full output in artifact {ref.digest[:12]})"
    )
    return result.model_copy(update={"output": preview, "output_ref": ref})


def _validation_message(name: str, exc: ValidationError) -> str:
    return f"invalid arguments for {name}: {'; '.join(problems(exc, '(arguments)'))}"


def person_decision(inv: ToolInvocation) -> str | None:
    """A person's decision on this call's unknown outcome (workflows/outcomes.py): it applies to the
    activity's first attempt only; later attempts follow the ledger as usual."""
    return inv.decision if activity.info().attempt == 1 else None


def assumed_done(inv: ToolInvocation, tool: str) -> ToolResult:
    """The result a person's `assume_done` records for the call."""
    return ToolResult(ok=True, output=inv.assumed_output or f"a person confirmed that this {tool} call took effect")


def tool_call(
    inv: ToolInvocation, key: str, name: str, act: Callable[[], Awaitable[ToolResult]], **how: Any
) -> exactly_once.Call[ToolResult, ToolResult]:
    """A tool's call (built-in or MCP) for the exactly-once protocol: its result carries the first
    undo record, secrets masked; a person's decision applies. `how`: the rest of `Call`'s fields."""
    how.setdefault("what", name)
    how.setdefault("did_not_act", (NotStarted,))
    return exactly_once.Call(
        key=key,
        act=act,
        result=_with_undo,
        recorded=ToolResult.model_validate,
        decision=person_decision(inv),
        assumed=lambda: assumed_done(inv, name),
        keeps_undo=True,
        redact=True,
        **how,
    )


def _with_undo(result: ToolResult, undo: dict[str, Any] | None) -> ToolResult:
    """`result` with the undo the ledger recorded first: the state from before the *first* attempt."""
    return result if undo is None else result.model_copy(update={"undo": undo})
