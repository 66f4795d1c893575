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


class RunControl:
    """The tools of `ratchet mcp`, one method each (its name is the tool's, its docstring the tool's
    description), every one a call of `ratchet.client`. The client comes from `client_factory()`,
    awaited once, on first use; a `RatchetError` (a refusal, a bad input, no such run) becomes a tool
    error whose text the assistant reads."""

    def __init__(self, client_factory: Callable[[], Awaitable[RatchetClient]]) -> None:
        self._client_factory = client_factory
        self._held: list[RatchetClient] = []

    async def _client(self) -> RatchetClient:
        if not self._held:
            self._held.append(await self._client_factory())
        return self._held[0]

    async def _run(self, workflow_id: str) -> RunHandle:
        return (await self._client()).get(workflow_id)

    @staticmethod
    async def _ask(call: Awaitable[Any]) -> Any:
        from mcp.server.mcpserver.exceptions import ToolError

        try:
            return await call
        except RatchetError as exc:
            raise ToolError(str(exc)) from None

    async def start_run(
        self,
        agent: str,
        objective: str,
        workflow_id: str | None = None,
        workspace: str | None = None,
        model: dict[str, Any] | None = None,
        budget: dict[str, Any] | None = None,
    ) -> dict[str, str]:
        """Start a durable agent run of a profile the workers offer; returns its workflow id."""
        fields = {"agent": agent, "objective": objective, "workspace": workspace, "model": model, "budget": budget}
        client = await self._client()
        started = await self._ask(client.start({k: v for k, v in fields.items() if v is not None}, workflow_id))
        return {"workflow_id": started.workflow_id}

    async def run_state(self, workflow_id: str) -> dict[str, Any]:
        """A run's phase, step, answer or last error, the calls waiting for approval or a decision, its
        checkpoints and effects."""
        state = await self._ask((await self._run(workflow_id)).state())
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

    async def transcript(self, workflow_id: str, offset: int = 0, limit: int = 20) -> dict[str, Any]:
        """A page of a run's conversation (earlier pages too, from before a continue-as-new; `total` counts all)."""
        page = await self._ask((await self._run(workflow_id)).transcript(offset, limit))
        return {
            "offset": page.offset,
            "total": page.total,
            "messages": [m.model_dump(mode="json", exclude_none=True) for m in page.messages],
        }

    async def approve(self, workflow_id: str, call_id: str) -> str:
        """Let a tool call that waits for a person run."""
        return await self._ask((await self._run(workflow_id)).approve(call_id))

    async def reject(self, workflow_id: str, call_id: str, reason: str = "rejected") -> str:
        """Refuse a tool call that waits for a person; the reason goes to the model."""
        return await self._ask((await self._run(workflow_id)).reject(call_id, reason))

    async def inbox(self, person: str | None = None, role: str | None = None) -> list[dict[str, Any]]:
        """Runs handed to a person's inbox (person:NAME in a profile's handoffs) or a role's (neither:
        anyone's), each with its handoff record: objective, summary, evidence, decisions, open questions."""
        items = await self._ask((await self._client()).inbox(person=person, role=role))
        return [i.model_dump(mode="json", exclude={"handoff": {"plan_before"}}) for i in items]

    async def respond(
        self,
        workflow_id: str,
        action: Literal["finish", "reply", "hand_back"],
        text: str,
        to: str | None = None,
        by: str | None = None,
    ) -> str:
        """Answer a run handed to a person: finish (text is its answer), reply (a message to the agent,
        which goes on) or hand_back (the profile `to` takes the task, text its notes)."""
        return await self._ask((await self._run(workflow_id)).respond(action, text, to=to, by=by))

    async def send_message(self, workflow_id: str, text: str) -> str:
        """Add a message to a run's conversation (at its next step boundary)."""
        await self._ask((await self._run(workflow_id)).send(text))
        return f"sent to {workflow_id}"

    async def ask_session(self, workflow_id: str, text: str, message_id: str | None = None) -> dict[str, Any]:
        """Ask a session (a run started with `session`) and get its turn's answer; the same message_id
        asked again is answered once."""
        answer = await self._ask((await self._run(workflow_id)).ask(text, message_id=message_id))
        return answer.model_dump(mode="json", exclude_none=True)

    async def rollback_plan(self, workflow_id: str, checkpoint_id: str) -> list[dict[str, Any]]:
        """What a rollback to a checkpoint would undo, newest first (nothing is changed); a running or a closed run."""
        plan = await self._ask((await self._run(workflow_id)).rollback_plan(checkpoint_id))
        return [item.model_dump(mode="json", exclude_none=True) for item in plan]

    async def rollback(
        self, workflow_id: str, checkpoint_id: str, then: Literal["continue", "stop"] = "continue"
    ) -> dict[str, Any]:
        """Undo a run's effects after a checkpoint, newest first, each at most once: a running run then
        continues or stops; a closed one (`start`: every effect) is rolled back by a RollbackWorkflow."""
        outcome = await self._ask((await self._run(workflow_id)).rollback(checkpoint_id, then=then))
        return outcome.model_dump(mode="json", exclude_none=True)

    async def shadow(
        self,
        runs: list[str],
        model: str | None = None,
        profile: str | None = None,
        profile_fields: dict[str, Any] | None = None,
        from_checkpoint: str | None = None,
        budget_usd: float | None = None,
        model_options: dict[str, Any] | None = None,
        bisect: bool = False,
        wait_s: float = 300,
    ) -> dict[str, Any]:
        """What a candidate (model: `recorded` or PROVIDER:MODEL with its model_options, another profile,
        profile fields such as system_prompt) would have done on recorded runs (workflow ids, or one
        visibility query), every side effect quarantined; the report once the shadows close (its `batch`
        names them for shadow_report). bisect with PROVIDER:MODEL: the first step its reply departs from
        the recorded one."""
        from ratchet.client.shadows import Candidate

        client = await self._client()
        candidate = Candidate(
            model=model, profile=profile, set=profile_fields or {}, from_checkpoint=from_checkpoint,
            budget_usd=budget_usd, model_options=model_options or {}, bisect=bisect,
        )  # fmt: skip
        selected = runs[0] if len(runs) == 1 and any(c in runs[0] for c in "=<> ") else runs
        batch = await self._ask(client.shadows.start(selected, candidate))
        return (await self._ask(client.shadows.report(batch, wait_s))).model_dump(mode="json")

    async def shadow_report(self, batch: str, wait_s: float = 0) -> dict[str, Any]:
        """A shadow batch compared with its originals (shadows still running are reported incomplete)."""
        client = await self._client()
        return (await self._ask(client.shadows.report(batch, wait_s))).model_dump(mode="json")


TOOLS: tuple[tuple[str, bool], ...] = (
    ("start_run", False),
    ("run_state", True),
    ("transcript", True),
    ("approve", False),
    ("reject", False),
    ("inbox", True),
    ("respond", False),
    ("send_message", False),
    ("ask_session", False),
    ("rollback_plan", True),
    ("rollback", False),
    ("shadow", False),
    ("shadow_report", True),
)
"""The tools `ratchet mcp` serves, in order: the `RunControl` method, and whether it only reads."""


def build_server(client_factory: Callable[[], Awaitable[RatchetClient]]) -> Any:
    """The MCP server; `client_factory()` gives the client (awaited once, on first use)."""
    from mcp.server.mcpserver import MCPServer
    from mcp.types import ToolAnnotations

    server = MCPServer("ratchet", instructions=INSTRUCTIONS)
    reading = ToolAnnotations(read_only_hint=True)
    control = RunControl(client_factory)
    for name, read_only in TOOLS:
        server.add_tool(getattr(control, name), annotations=reading if read_only else None)
    return server


def main(args: argparse.Namespace) -> int:
    """`ratchet mcp [--port N]`: serve until stdin closes (stdio) or the process is stopped (HTTP)."""
    server = build_server(RatchetClient.connect)
    if args.port is None:
        server.run()
    else:
        server.run("streamable-http", host=args.host, port=args.port)
    return 0
