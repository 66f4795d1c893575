"""`ratchet mcp`: run control over MCP, so an MCP-capable assistant or IDE can drive durable agents.

An MCP server (the official SDK's `MCPServer`) on stdio, or streamable HTTP on `--host`/`--port`,
whose tools are the run verbs of the `ratchet` command: start a run, its state, a page of its
transcript, approve or reject a call, send a message, a rollback's plan, a rollback. It is a
Temporal client with the CLI's settings (TEMPORAL_*, RATCHET_TASK_QUEUE, RATCHET_CODEC_KEYS); a
refused update or a bad input is a tool error the assistant sees, not a crash.
"""

from __future__ import annotations

import argparse
import uuid
from typing import Any

from pydantic import ValidationError

from ratchet.contracts import (
    AGENT_WORKFLOW, AgentRun, AgentState, ApproveRequest, RejectRequest, RollbackReport, RollbackRequest, TranscriptPage,
)

INSTRUCTIONS = (
    "Durable LLM agents on Temporal (Ratchet). Start a run with start_run, follow it with run_state, "
    "answer the calls it waits on with approve or reject, and undo its work back to a checkpoint with "
    "rollback (see rollback_plan first)."
)


def build_server(client_factory: Any, task_queue: str) -> Any:
    """The MCP server; `client_factory()` gives the Temporal client (awaited once, on first use)."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.types import ToolAnnotations
    from temporalio.client import RPCError, WorkflowUpdateFailedError

    from ratchet.workflows.agent import AgentWorkflow

    server = MCPServer("ratchet", instructions=INSTRUCTIONS)
    reading = ToolAnnotations(read_only_hint=True)
    held: list[Any] = []

    async def client() -> Any:
        if not held:
            held.append(await client_factory())
        return held[0]

    async def handle(workflow_id: str) -> Any:
        return (await client()).get_workflow_handle(workflow_id)

    async def update(workflow_id: str, name: str, request: Any, result_type: type) -> Any:
        try:
            return await (await handle(workflow_id)).execute_update(name, request, result_type=result_type)
        except WorkflowUpdateFailedError as exc:
            raise ToolError(f"{name} refused: {exc.cause}") from None
        except RPCError as exc:
            raise ToolError(f"{workflow_id}: {exc}") from None

    async def state_of(workflow_id: str) -> AgentState:
        try:
            state = await (await handle(workflow_id)).query(AgentWorkflow.state)
        except RPCError as exc:
            raise ToolError(f"{workflow_id}: {exc}") from None
        if state is None:
            raise ToolError(f"{workflow_id} has not started its first step yet; ask again")
        return state

    @server.tool()
    async def start_run(agent: str, objective: str, workflow_id: str | None = None, workspace: str | None = None,
                        model: dict[str, Any] | None = None, budget: dict[str, Any] | None = None) -> dict[str, str]:
        """Start a durable agent run of a profile the workers offer; returns its workflow id."""
        fields = {"agent": agent, "objective": objective, "workspace": workspace, "model": model, "budget": budget}
        try:
            run = AgentRun.model_validate({k: v for k, v in fields.items() if v is not None})
        except ValidationError as exc:
            raise ToolError("invalid run: " + "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())) from None
        workflow_id = workflow_id or f"{agent}-{uuid.uuid4().hex[:8]}"
        try:
            await (await client()).start_workflow(AGENT_WORKFLOW, run.model_dump(exclude_none=True, mode="json"), id=workflow_id, task_queue=task_queue)
        except RPCError as exc:
            raise ToolError(f"cannot start {workflow_id}: {exc}") from None
        return {"workflow_id": workflow_id}

    @server.tool(annotations=reading)
    async def run_state(workflow_id: str) -> dict[str, Any]:
        """A run's phase, step, answer or last error, the calls waiting for approval or a decision, its checkpoints and effects."""
        state = await state_of(workflow_id)
        return {
            "phase": state.phase.value, "step": state.step, "answer": state.answer, "last_error": state.last_error,
            "pending_approvals": [p.model_dump(mode="json") for p in state.pending_approvals],
            "pending_decisions": [d.model_dump(mode="json") for d in state.pending_decisions],
            "checkpoints": [{"id": c.id, "step": c.step, "summary": c.summary} for c in state.checkpoints],
            "effects": [{"tool": e.tool, "step": e.step, "status": e.status.value} for e in state.effects],
        }

    @server.tool(annotations=reading)
    async def transcript(workflow_id: str, offset: int = 0, limit: int = 20) -> dict[str, Any]:
        """A page of a run's conversation (the most recent part the run holds; `total` counts all)."""
        try:
            page = await (await handle(workflow_id)).query(AgentWorkflow.transcript, TranscriptPage(offset=offset, limit=limit))
        except (RPCError, ValidationError) as exc:
            raise ToolError(f"{workflow_id}: {exc}") from None
        return {"offset": page.offset, "total": page.total, "messages": [m.model_dump(mode="json", exclude_none=True) for m in page.messages]}

    @server.tool()
    async def approve(workflow_id: str, call_id: str) -> str:
        """Let a tool call that waits for a person run."""
        return await update(workflow_id, "approve", ApproveRequest(call_id=call_id), str)

    @server.tool()
    async def reject(workflow_id: str, call_id: str, reason: str = "rejected") -> str:
        """Refuse a tool call that waits for a person; the reason goes to the model."""
        return await update(workflow_id, "reject", RejectRequest(call_id=call_id, reason=reason), str)

    @server.tool()
    async def send_message(workflow_id: str, text: str) -> str:
        """Add a message to a run's conversation (at its next step boundary)."""
        try:
            await (await handle(workflow_id)).signal("send_message", text)
        except RPCError as exc:
            raise ToolError(f"{workflow_id}: {exc}") from None
        return f"sent to {workflow_id}"

    @server.tool(annotations=reading)
    async def rollback_plan(workflow_id: str, checkpoint_id: str) -> list[dict[str, Any]]:
        """What a rollback to a checkpoint would undo, newest first (nothing is changed)."""
        try:
            plan = await (await handle(workflow_id)).query(AgentWorkflow.rollback_plan, checkpoint_id)
        except RPCError as exc:
            raise ToolError(f"{workflow_id}: {exc}") from None
        return [item.model_dump(mode="json", exclude_none=True) for item in plan]

    @server.tool()
    async def rollback(workflow_id: str, checkpoint_id: str, then: str = "continue") -> dict[str, Any]:
        """Undo a running run's effects after a checkpoint, newest first, then continue or stop."""
        try:
            request = RollbackRequest(checkpoint_id=checkpoint_id, then=then)  # type: ignore[arg-type]
        except ValidationError as exc:
            raise ToolError(f"invalid rollback: {exc.errors()[0]['msg']}") from None
        report = await update(workflow_id, "rollback", request, RollbackReport)
        return report.model_dump(mode="json", exclude_none=True)

    return server


def main(args: argparse.Namespace) -> int:
    """`ratchet mcp [--port N]`: serve until stdin closes (stdio) or the process is stopped (HTTP)."""
    from ratchet.ops.settings import load_settings
    from ratchet.plugin import connect

    settings = load_settings()
    server = build_server(lambda: connect(settings), settings.task_queue)
    if args.port is None:
        server.run()
    else:
        server.run("streamable-http", host=args.host, port=args.port)
    return 0
