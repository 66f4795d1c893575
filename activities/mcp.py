"""MCP tool activities: the calls of each server's tools run as activity type `mcp.<server>`,
the undo of a compensable MCP tool as `undo.<the name the model sees>`, and `run.prepare` lists the
servers a profile uses through `McpActivities.discover`.

A call names the run's pinned tool list (`ToolInvocation.catalog`, the digest in the plan) and the
tool (`ToolInvocation.tool`); what the server lists today does not matter to it. Side-effecting
calls go through the exactly-once protocol as every tool's do (activities/exactly_once.py), with the
key also sent to the server in the request's `_meta` (`ratchet/idempotency-key`):

- The connection is made (the server started) *before* the ledger entry: a server that is down or
  cannot start leaves nothing behind, and the activity is retried with backoff (`McpUnavailable`),
  or fails the run naming the server when its configuration cannot work (`McpConfigError`).
- A call interrupted after its request left (the server crashed, the connection closed, no answer in
  time) leaves the entry STARTED: the next attempt repeats it only if the tool is idempotent
  (`idempotentHint`, or the profile says so); otherwise the outcome is unknown (`OutcomeUnknown`),
  the path every tool takes, never a blind retry.
- A compensable tool's undo record (the compensating call) goes to the ledger before the call when
  it needs only the call's arguments, else with the result.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from . import caller, exactly_once
from .heartbeat import INTERVAL_S, heartbeating
from .tools import stored, tool_call
from ratchet.contracts import (
    ArtifactRef,
    EffectClass,
    ErrorType,
    ToolInvocation,
    ToolResult,
    ToolSchema,
    ToolSpec,
    UndoInvocation,
)
from ratchet.core.keys import call_key, undo_key
from ratchet.core.profiles import AgentProfile, ProfileRegistry
from ratchet.core.tools import runs_locally
from ratchet.mcp.catalog import McpCatalog, McpTool, check_names, pin
from ratchet.mcp.config import McpConfigError, public_name
from ratchet.mcp.pool import McpInterrupted, McpPool, McpRefused, McpSession, McpUnavailable
from ratchet.mcp.results import arguments_problem, stores_artifacts, tool_result, undo_of
from ratchet.stores.artifacts import ArtifactStore, get_json, put_json
from ratchet.stores.ledger import Entry, EntryStatus, Ledger

MCP_UNAVAILABLE = "McpUnavailable"
"""`ApplicationError.type` of a server that cannot be reached or started now (retried)."""
MCP_INTERRUPTED = "McpInterrupted"
"""... of a call whose connection broke or that got no answer in time (retried if it may be)."""
CATALOGS_CACHED = 64


@dataclass
class PinnedTools:
    """A run's MCP tools as its plan holds them: specs, the model's schemas, the catalog's digest."""

    specs: list[ToolSpec] = field(default_factory=list)
    schemas: list[ToolSchema] = field(default_factory=list)
    ref: str | None = None


class McpActivities:
    def __init__(self, pool: McpPool, profiles: ProfileRegistry, artifacts: ArtifactStore, ledger: Ledger) -> None:
        self.pool = pool
        self.profiles = profiles
        self.artifacts = artifacts
        self.ledger = ledger
        self._catalogs: OrderedDict[str, McpCatalog] = OrderedDict()

    def activities(self) -> list[Callable]:
        """`mcp.<server>` for each configured server, `undo.<name>` for each tool a profile compensates."""
        calls = [self._call_activity(name) for name in sorted(self.pool.servers)]
        compensated = sorted(
            {
                public_name(toolset.server, tool)
                for profile in self.profiles.profiles.values()
                for toolset in profile.mcp
                for tool in toolset.compensations
            }
        )
        return calls + [self._undo_activity(name) for name in compensated]

    def _call_activity(self, server: str) -> Callable:
        async def run_mcp_tool(inv: ToolInvocation) -> ToolResult:
            timeout = activity.info().heartbeat_timeout
            if not timeout:  # a local activity: cancelled in process, no heartbeat
                return await self.call(inv)
            # as every tool's: the heartbeat carries a cancellation (a rollback, a pause, the deadline)
            async with heartbeating(min(INTERVAL_S, timeout.total_seconds() / 4)):
                return await self.call(inv)

        run_mcp_tool.__name__ = f"mcp_{server}"
        return activity.defn(name=f"mcp.{server}")(run_mcp_tool)

    def _undo_activity(self, name: str) -> Callable:
        async def run_mcp_undo(inv: UndoInvocation) -> str:
            async with heartbeating():
                return await self.undo(inv)

        run_mcp_undo.__name__ = f"undo_{name}"
        return activity.defn(name=f"undo.{name}")(run_mcp_undo)

    # --- planning ---------------------------------------------------------------------------

    async def discover(self, profile: AgentProfile) -> list[McpTool]:
        """The tools of every server `profile` uses, as listed now (run.prepare pins them)."""
        tools: list[McpTool] = []
        for toolset in profile.mcp:
            try:
                tools += pin(toolset, await self.pool.list_tools(toolset.server))
            except McpConfigError as exc:
                raise ApplicationError(
                    f"profile {profile.name!r}: {exc}", type=ErrorType.INVALID_PROFILE, non_retryable=True
                ) from None
            except McpUnavailable as exc:
                raise ApplicationError(str(exc), type=MCP_UNAVAILABLE) from None
        return tools

    def pinned(self, tools: list[McpTool], local_ok: bool, taken: set[str]) -> PinnedTools:
        """In run.prepare's thread: the plan's specs and the model's schemas of `tools`, and the
        digest of their catalog, stored once. `taken`: the names of the profile's own tools."""
        if not tools:
            return PinnedTools()
        try:
            check_names(tools, taken)
        except McpConfigError as exc:
            raise ApplicationError(str(exc), type=ErrorType.INVALID_PROFILE, non_retryable=True) from None
        specs = []
        for tool in tools:
            server = self.pool.server(tool.server)
            spec = tool.spec(server)
            spec.local = local_ok and server.local and runs_locally(spec)
            specs.append(spec)
        ref = put_json(self.artifacts, McpCatalog(tools=tools).model_dump(mode="json", exclude_defaults=True))
        return PinnedTools(specs=specs, schemas=[t.tool_schema() for t in tools], ref=ref.digest)

    # --- calls ------------------------------------------------------------------------------

    async def call(self, inv: ToolInvocation) -> ToolResult:
        key = inv.key or call_key(caller.workflow_id(), inv.step, inv.call_id)
        tool = await self._pinned(inv.catalog, inv.tool)
        problem = arguments_problem(tool, inv.arguments)
        if problem is not None:
            return ToolResult(ok=False, output=problem, error_type=ErrorType.INVALID_ARGUMENTS)
        try:
            async with self.pool.session(tool.server) as session:
                result = await self._call(session, tool, inv, key)
        except McpConfigError as exc:
            raise ApplicationError(str(exc), type=ErrorType.INVALID_PROFILE, non_retryable=True) from None
        except McpUnavailable as exc:
            raise ApplicationError(str(exc), type=MCP_UNAVAILABLE) from None
        except McpInterrupted as exc:
            raise ApplicationError(str(exc), type=MCP_INTERRUPTED) from None
        return await stored(result, self.artifacts)

    async def _call(self, session: McpSession, tool: McpTool, inv: ToolInvocation, key: str) -> ToolResult:
        if tool.effect == EffectClass.READ_ONLY:
            return await self._send(session, tool, inv, key)
        undo_first = None
        if tool.compensation is not None and not tool.compensation.needs_result():
            undo_first = undo_of(tool, inv.arguments)
        call = tool_call(
            inv,
            key,
            tool.name,
            lambda: self._send(session, tool, inv, key),
            what=f"{tool.name} (MCP server {tool.server!r})",
            idempotent=tool.idempotent,
            undo_first=undo_first,
            did_not_act=(McpUnavailable,),  # the request never reached the server
        )
        return await exactly_once.run(self.ledger, call)

    async def _send(self, session: McpSession, tool: McpTool, inv: ToolInvocation, key: str) -> ToolResult:
        try:
            raw = await session.call(tool.tool, inv.arguments, key, _timeout_s(session))
        except McpRefused as exc:
            return ToolResult(ok=False, output=f"{tool.name} failed: {exc}", error_type=ErrorType.TOOL_ERROR)
        if stores_artifacts(raw):  # the artifact store may be remote: off the event loop
            result, structured = await asyncio.to_thread(tool_result, tool, raw, self.artifacts)
        else:
            result, structured = tool_result(tool, raw, self.artifacts)
        if result.ok and tool.compensation is not None:
            result.undo = undo_of(tool, inv.arguments, structured)
        return result

    async def _pinned(self, catalog: str, name: str) -> McpTool:
        """The tool as the run pinned it (the catalog is read once per worker, then cached)."""
        if not catalog or not name:
            raise ApplicationError(
                "an MCP call without its run's tool list or tool name",
                type=ErrorType.FATAL_TOOL_ERROR,
                non_retryable=True,
            )
        pinned = self._catalogs.get(catalog)
        if pinned is None:
            pinned = McpCatalog.model_validate(
                await asyncio.to_thread(get_json, self.artifacts, ArtifactRef.json(catalog))
            )
            self._catalogs[catalog] = pinned
            while len(self._catalogs) > CATALOGS_CACHED:
                self._catalogs.popitem(last=False)
        self._catalogs.move_to_end(catalog)
        tool = pinned.get(name)
        if tool is None:
            raise ApplicationError(
                f"tool {name!r} is not in the run's pinned MCP tool list",
                type=ErrorType.FATAL_TOOL_ERROR,
                non_retryable=True,
            )
        return tool

    # --- undo -------------------------------------------------------------------------------

    async def undo(self, inv: UndoInvocation) -> str:
        """Call the compensating tool the effect's undo record names, at most once per key."""

        async def act(info: dict[str, Any] | None, forward: Entry | None) -> str:
            if info is None:
                return _nothing_to_undo(inv, forward)
            return await self._compensate(inv, info)

        return await exactly_once.undo(self.ledger, inv.key, inv.undo, act)

    async def _compensate(self, inv: UndoInvocation, info: dict[str, Any]) -> str:
        if "problem" in info or not {"server", "tool"} <= set(info):
            problem = info.get("problem", "its undo record names no compensating MCP call")
            raise ApplicationError(f"undo {inv.tool}: {problem}", type=ErrorType.UNDO_FAILED, non_retryable=True)
        try:
            async with self.pool.session(info["server"]) as session:
                raw = await session.call(
                    info["tool"], info.get("arguments") or {}, undo_key(inv.key), _timeout_s(session)
                )
        except McpConfigError as exc:
            raise ApplicationError(f"undo {inv.tool}: {exc}", type=ErrorType.UNDO_FAILED, non_retryable=True) from None
        except (McpUnavailable, McpInterrupted) as exc:
            raise ApplicationError(f"undo {inv.tool}: {exc}", type=MCP_UNAVAILABLE) from None
        except McpRefused as exc:
            raise ApplicationError(
                f"undo {inv.tool}: {info['tool']} failed: {exc}", type=ErrorType.UNDO_FAILED, non_retryable=True
            ) from None
        text = " ".join(getattr(b, "text", "") for b in raw.content).strip()
        if raw.is_error:  # retried with the undo's policy (about a minute), as any undo that fails
            raise ApplicationError(f"undo {inv.tool}: {info['tool']} failed: {text[:500]}", type=ErrorType.UNDO_FAILED)
        return f"{info['tool']}: {text[:2000] or 'done'}"


def _timeout_s(session: McpSession) -> float:
    """The activity's start-to-close timeout (the call must answer within it), else the server's."""
    timeout = activity.info().start_to_close_timeout
    return timeout.total_seconds() if timeout else session.server.timeout_s


def _nothing_to_undo(inv: UndoInvocation, forward: Entry | None) -> str:
    """The undo of a call without an undo record: fine when the call never started or reported an
    error; a call whose outcome is unknown and whose compensation needs its result cannot be undone."""
    if forward is None:
        return "nothing to undo: the call never started"
    if forward.status == EntryStatus.COMPLETED and not (forward.result or {}).get("ok", False):
        return "nothing to undo: the call failed"
    raise ApplicationError(
        f"undo {inv.tool}: {inv.key}: the call's outcome is unknown and its compensation needs the call's result",
        type=ErrorType.UNDO_FAILED,
        non_retryable=True,
    )
