"""`ratchet mcp`: run control over MCP, so an MCP-capable assistant or IDE can drive durable agents.

An MCP server (the official SDK's `MCPServer`) on stdio, or streamable HTTP on `--host`/`--port`,
whose tools are the run verbs of the `ratchet` command, each a call of `ratchet.client`: start a
run, its state, a page of its transcript, approve or reject a call, send a message, a rollback's
plan, a rollback (of a running or a closed run, archived effects included), shadows of recorded
runs with a candidate change and their report. It connects with the CLI's settings (TEMPORAL_*,
RATCHET_TASK_QUEUE, RATCHET_CODEC_KEYS); a refused update or a bad input is a tool error the
assistant sees, not a crash.
"""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from ratchet.client import RatchetClient, RatchetError, RunHandle

INSTRUCTIONS = (
    "Durable LLM agents on Temporal (Ratchet). Start a run with start_run, follow it with run_state, "
    "answer the calls it waits on with approve or reject, and undo its work back to a checkpoint with "
    "rollback (see rollback_plan first)."
)


def build_server(client_factory: Callable[[], Awaitable[RatchetClient]]) -> Any:
    """The MCP server; `client_factory()` gives the client (awaited once, on first use)."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.types import ToolAnnotations

    server = MCPServer("ratchet", instructions=INSTRUCTIONS)
    reading = ToolAnnotations(read_only_hint=True)
    held: list[RatchetClient] = []

    async def run(workflow_id: str) -> RunHandle:
        if not held:
            held.append(await client_factory())
        return held[0].get(workflow_id)

    async def ask(call: Awaitable[Any]) -> Any:
        try:
            return await call
        except RatchetError as exc:  # a refusal, a bad input, no such run: the assistant reads why
            raise ToolError(str(exc)) from None

    @server.tool()
    async def start_run(
        agent: str,
        objective: str,
        workflow_id: str | None = None,
        workspace: str | None = None,
        model: dict[str, Any] | None = None,
        budget: dict[str, Any] | None = None,
    ) -> dict[str, str]:
        """Start a durable agent run of a profile the workers offer; returns its workflow id."""
        fields = {"agent": agent, "objective": objective, "workspace": workspace, "model": model, "budget": budget}
        if not held:
            held.append(await client_factory())
        started = await ask(held[0].start({k: v for k, v in fields.items() if v is not None}, workflow_id))
        return {"workflow_id": started.workflow_id}

    @server.tool(annotations=reading)
    async def run_state(workflow_id: str) -> dict[str, Any]:
        """A run's phase, step, answer or last error, the calls waiting for approval or a decision, its
        checkpoints and effects."""
        state = await ask((await run(workflow_id)).state())
        return {
            "phase": state.phase.value,
            "step": state.step,
            "answer": state.answer,
            "last_error": state.last_error,
            "pending_approvals": [p.model_dump(mode="json") for p in state.calls.pending_approvals],
            "pending_decisions": [d.model_dump(mode="json") for d in state.calls.pending_decisions],
            "checkpoints": [
                {"id": c.id, "step": c.step, "summary": c.summary} for c in state.effects.checkpoints.items
            ],
            "effects": [{"tool": e.tool, "step": e.step, "status": e.status.value} for e in state.effects.stack.items],
        }

    @server.tool(annotations=reading)
    async def transcript(workflow_id: str, offset: int = 0, limit: int = 20) -> dict[str, Any]:
        """A page of a run's conversation (earlier pages too, from before a continue-as-new; `total` counts all)."""
        page = await ask((await run(workflow_id)).transcript(offset, limit))
        return {
            "offset": page.offset,
            "total": page.total,
            "messages": [m.model_dump(mode="json", exclude_none=True) for m in page.messages],
        }

    @server.tool()
    async def approve(workflow_id: str, call_id: str) -> str:
        """Let a tool call that waits for a person run."""
        return await ask((await run(workflow_id)).approve(call_id))

    @server.tool()
    async def reject(workflow_id: str, call_id: str, reason: str = "rejected") -> str:
        """Refuse a tool call that waits for a person; the reason goes to the model."""
        return await ask((await run(workflow_id)).reject(call_id, reason))

    @server.tool()
    async def send_message(workflow_id: str, text: str) -> str:
        """Add a message to a run's conversation (at its next step boundary)."""
        await ask((await run(workflow_id)).send(text))
        return f"sent to {workflow_id}"

    @server.tool()
    async def ask_session(workflow_id: str, text: str, message_id: str | None = None) -> dict[str, Any]:
        """Ask a session (a run started with `session`) and get its turn's answer; the same message_id
        asked again is answered once."""
        answer = await ask((await run(workflow_id)).ask(text, message_id=message_id))
        return answer.model_dump(mode="json", exclude_none=True)

    @server.tool(annotations=reading)
    async def rollback_plan(workflow_id: str, checkpoint_id: str) -> list[dict[str, Any]]:
        """What a rollback to a checkpoint would undo, newest first (nothing is changed); a running or a closed run."""
        plan = await ask((await run(workflow_id)).rollback_plan(checkpoint_id))
        return [item.model_dump(mode="json", exclude_none=True) for item in plan]

    @server.tool()
    async def rollback(
        workflow_id: str, checkpoint_id: str, then: Literal["continue", "stop"] = "continue"
    ) -> dict[str, Any]:
        """Undo a run's effects after a checkpoint, newest first, each at most once: a running run then
        continues or stops; a closed one (`start`: every effect) is rolled back by a RollbackWorkflow."""
        outcome = await ask((await run(workflow_id)).rollback(checkpoint_id, then=then))
        return outcome.model_dump(mode="json", exclude_none=True)

    @server.tool()
    async def shadow(
        runs: list[str],
        model: str | None = None,
        profile: str | None = None,
        profile_fields: dict[str, Any] | None = None,
        from_checkpoint: str | None = None,
        budget_usd: float | None = None,
        wait_s: float = 300,
    ) -> dict[str, Any]:
        """What a candidate (model: `recorded` or PROVIDER:MODEL, another profile, profile fields such as
        system_prompt) would have done on recorded runs (workflow ids, or one visibility query), every side
        effect quarantined; the report once the shadows close (its `batch` names them for shadow_report)."""
        from ratchet.client.shadows import Candidate

        if not held:
            held.append(await client_factory())
        candidate = Candidate(
            model=model, profile=profile, set=profile_fields or {}, from_checkpoint=from_checkpoint,
            budget_usd=budget_usd,
        )  # fmt: skip
        selected = runs[0] if len(runs) == 1 and any(c in runs[0] for c in "=<> ") else runs
        batch = await ask(held[0].shadows.start(selected, candidate))
        return (await ask(held[0].shadows.report(batch, wait_s))).model_dump(mode="json")

    @server.tool(annotations=reading)
    async def shadow_report(batch: str, wait_s: float = 0) -> dict[str, Any]:
        """A shadow batch compared with its originals (shadows still running are reported incomplete)."""
        if not held:
            held.append(await client_factory())
        return (await ask(held[0].shadows.report(batch, wait_s))).model_dump(mode="json")

    return server


def main(args: argparse.Namespace) -> int:
    """`ratchet mcp [--port N]`: serve until stdin closes (stdio) or the process is stopped (HTTP)."""
    server = build_server(RatchetClient.connect)
    if args.port is None:
        server.run()
    else:
        server.run("streamable-http", host=args.host, port=args.port)
    return 0
