"""The scenarios `make histories` records (ratchet/record_histories.py), one per workflow path.

A scenario is an async function registered with `@scenario("name")`: it starts one run through
`Recorder.run` (fixed workflow id `history-<name>`) and checks the run ended as intended, so a
recording never silently captures the wrong path. Add one for each new path worth guarding
(approval, rollback, fork, continue-as-new, compensation failure) and run `make histories`.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from temporalio.client import WorkflowFailureError

from ratchet.client import NotStartedYet, RatchetClient, RunFailed, RunHandle
from ratchet.contracts import AGENT_WORKFLOW, TO_START, AgentResult, AgentState, Phase, rollback_id
from devtools.demo import SAMPLE, demo_script
from ratchet.ops.settings import Settings
from ratchet.testing.anthropic_server import AnthropicServer
from ratchet.testing.openai_server import OpenAIServer

TASK_QUEUE = "histories"


@dataclass
class Recorder:
    runs: RatchetClient
    """On the recording's task queue (`settings.task_queue`, TASK_QUEUE)."""
    settings: Settings
    openai: OpenAIServer
    api_key: str
    anthropic: AnthropicServer
    """Serves the anthropic provider of the recording worker under `api_key` too."""

    async def run(self, name: str, run: dict, seed: Path | None = None) -> AgentResult | str:
        """Run to its end: the result, or the failure message of a failed run. `seed` is copied
        into the run's workspace first."""
        if seed is not None:
            target = self.settings.workspace_root / run["workspace"]
            shutil.copytree(seed, target, ignore=shutil.ignore_patterns("__pycache__"))
        handle = await self.runs.start(run, workflow_id(name))
        try:
            return await asyncio.wait_for(handle.result(), timeout=60)
        except RunFailed as failure:
            return failure.reason


Scenario = Callable[[Recorder], Awaitable[None]]
SCENARIOS: dict[str, Scenario] = {}
RECORDED: dict[str, str] = {}
"""scenario -> the workflow id whose history it records, when not its own run's (`workflow_id`)."""


def scenario(name: str, records: str | None = None) -> Callable[[Scenario], Scenario]:
    def register(fn: Scenario) -> Scenario:
        SCENARIOS[name] = fn
        if records is not None:
            RECORDED[name] = records
        return fn

    return register


def workflow_id(name: str) -> str:
    return f"history-{name}"


def recorded_id(name: str) -> str:
    """The workflow id of the history scenario `name` records."""
    return RECORDED.get(name, workflow_id(name))


def expect(ok: bool, what: str, got: object) -> None:
    if not ok:
        raise RuntimeError(f"expected {what}, got {got!r}")


def scripted(agent: str, script: list[dict], **extra: object) -> dict:
    return {"agent": agent, "objective": "do the task", "model": {"provider": "scripted", "options": {"script": script}}, **extra}


def probe_call(**arguments: object) -> dict:
    return {"tool_calls": [{"name": "probe_append", "arguments": arguments}]}


def ended(result: AgentResult | str, phase: Phase) -> bool:
    return isinstance(result, AgentResult) and result.phase == phase


@scenario("plain-run")
async def plain_run(rec: Recorder) -> None:
    """The coder fixes examples/calculator: list, test, read, write, test, answer."""
    run = scripted("coder", demo_script(), workspace="calc")
    result = await rec.run("plain-run", run, seed=SAMPLE)
    expect(ended(result, Phase.DONE), "DONE", result)


@scenario("tool-retry")
async def tool_retry(rec: Recorder) -> None:
    """A tool fails its first attempt; Temporal retries it with the same idempotency key."""
    run = scripted("probe", [probe_call(label="a", fail_first=True), {"content": "ok"}], workspace="retry")
    result = await rec.run("tool-retry", run)
    expect(ended(result, Phase.DONE), "DONE", result)


@scenario("bad-tool-calls")
async def bad_tool_calls(rec: Recorder) -> None:
    """An unknown tool, arguments that fail validation and malformed JSON go back to the model."""
    bad = {"tool_calls": [
        {"name": "rm_rf", "arguments": {}},
        {"name": "probe_append", "arguments": {"nope": 1}},
        {"name": "probe_append", "arguments": "{not json"},
    ]}
    run = scripted("probe", [bad, probe_call(label="fixed"), {"content": "recovered"}], workspace="bad")
    result = await rec.run("bad-tool-calls", run)
    expect(ended(result, Phase.DONE), "DONE", result)


@scenario("budget-exhausted")
async def budget_exhausted(rec: Recorder) -> None:
    """The step budget ends a run that would go on calling tools."""
    loop = [probe_call(label=str(i)) for i in range(10)]
    run = scripted("probe", loop, workspace="budget", budget={"max_steps": 3})
    result = await rec.run("budget-exhausted", run)
    expect(ended(result, Phase.BUDGET_EXHAUSTED), "BUDGET_EXHAUSTED", result)


@scenario("invalid-input")
async def invalid_input(rec: Recorder) -> None:
    """Bad input fails the run at once, naming the field. Started with the raw SDK, as `temporal
    workflow start --input` would: `ratchet.client` refuses such a run before it starts."""
    handle = await rec.runs.temporal.start_workflow(
        AGENT_WORKFLOW, {"agent": "probe", "objective": "x", "budget": {"max_steps": 0}}, id=workflow_id("invalid-input"),
        task_queue=TASK_QUEUE,
    )
    try:
        result = await asyncio.wait_for(handle.result(), timeout=60)
    except WorkflowFailureError as failure:
        result = str(failure.cause)
    expect(isinstance(result, str) and "budget.max_steps" in result, "an InvalidInput failure", result)


@scenario("model-401")
async def model_401(rec: Recorder) -> None:
    """The model endpoint answers 401: the run fails at once, not retried (local OpenAI server)."""
    rec.openai.enqueue_faults([{"status": 401}], key=rec.api_key)
    result = await rec.run("model-401", {"agent": "probe", "objective": "x", "workspace": "auth"})
    expect(isinstance(result, str) and "401" in result, "a 401 failure", result)


@scenario("anthropic")
async def anthropic_run(rec: Recorder) -> None:
    """The coder agent on the anthropic provider (local Anthropic server): a fix, a checkpoint, a
    failed verification rolled back, prompt cache reads counted."""
    rec.anthropic.set_script(demo_script(), key=rec.api_key)
    run = {"agent": "coder", "objective": "fix it", "workspace": "claude", "model": {"provider": "anthropic"}}
    result = await rec.run("anthropic", run, seed=SAMPLE)
    done = isinstance(result, AgentResult) and result.phase == Phase.DONE and result.used.cache_read_tokens > 0
    expect(done, "DONE with cache reads", result)


@scenario("typed-output")
async def typed_output(rec: Recorder) -> None:
    """A run with an output schema: an answer that does not match goes back to the model, the next
    one is the result's output."""
    schema = {"type": "object", "properties": {"verdict": {"enum": ["pass", "fail"]}}, "required": ["verdict"]}
    script = [{"tool_calls": [{"name": "final_answer", "arguments": {"verdict": v}}]} for v in ("maybe", "pass")]
    result = await rec.run("typed-output", {**scripted("probe", script, workspace="typed"), "output_schema": schema})
    expect(isinstance(result, AgentResult) and result.output == {"verdict": "pass"}, "DONE with the output", result)


async def _until(handle: RunHandle, predicate, timeout: float = 30) -> AgentState:
    async with asyncio.timeout(timeout):
        while True:
            try:
                state = await handle.state()
                if predicate(state):
                    return state
            except NotStartedYet:
                pass
            await asyncio.sleep(0.1)


def _write(path: str, content: str) -> dict:
    return {"name": "write_file", "arguments": {"path": path, "content": content}}


def _ticket(title: str) -> dict:
    return {"name": "create_ticket", "arguments": {"title": title}}


@scenario("approval")
async def approval(rec: Recorder) -> None:
    """A tool call waits for a person: one approved, one rejected (updates), then the answer."""
    script = [{"tool_calls": [_ticket("prod: restart"), _ticket("prod: drop table")]}, {"content": "done"}]
    handle = await rec.runs.start(scripted("approver", script, workspace="approval"), workflow_id("approval"))
    state = await _until(handle, lambda s: len(s.calls.pending_approvals) == 2)
    first, second = (p.call_id for p in state.calls.pending_approvals)
    await handle.approve(first)
    await handle.reject(second, reason="not in prod")
    expect(ended(await handle.result(), Phase.DONE), "DONE", "approval run")


@scenario("person-handoff")
async def person_handoff(rec: Recorder) -> None:
    """A run hands its task to a person's inbox (AWAITING_PERSON, RatchetHandedTo); she hands it
    back to another profile (the `respond` update), which finishes."""
    handoff = {"name": "handoff", "arguments": {"to": "person:alice", "summary": "which version?"}}
    script = [{"tool_calls": [_write("a.txt", "a\n")]}, {"tool_calls": [handoff]}, {"tool_calls": [_write("b.txt", "v2\n")]}]
    run = scripted("asker", [*script, {"content": "fixed"}], workspace="person-handoff")
    handle = await rec.runs.start(run, workflow_id("person-handoff"))
    await _until(handle, lambda s: s.phase == Phase.AWAITING_PERSON)
    await handle.respond("hand_back", "use v2", to="fixer", by="alice")
    expect(ended(await handle.result(), Phase.DONE), "DONE", "person-handoff run")


@scenario("message")
async def message(rec: Recorder) -> None:
    """A message signalled during a step joins the conversation at the next step boundary."""
    script = [{"tool_calls": [{"name": "wait", "arguments": {"seconds": 1}}]}, {"content": "read it"}]
    handle = await rec.runs.start(scripted("approver", script, workspace="message"), workflow_id("message"))
    await _until(handle, lambda s: s.step == 1)
    await handle.send("also check the logs")
    expect(ended(await handle.result(), Phase.DONE), "DONE", "message run")


ROLLBACK_SCRIPT = [
    {"tool_calls": [_write("a.txt", "v1\n"), _ticket("t1")]},
    {"tool_calls": [_write("a.txt", "v2\n"), _ticket("t2")]},
    {"tool_calls": [{"name": "probe_wait", "arguments": {"seconds": 1}}]},
    {"content": "finished"},
]


@scenario("rollback")
async def rollback(rec: Recorder) -> None:
    """Two verified checkpoints, pause, then a rollback update to cp-1 that stops the run."""
    handle = await rec.runs.start(scripted("saga", ROLLBACK_SCRIPT, workspace="rollback"), workflow_id("rollback"))
    await _until(handle, lambda s: len(s.effects.checkpoints.items) == 2)
    await handle.pause()
    await _until(handle, lambda s: s.phase == Phase.PAUSED)
    await handle.rollback("cp-1", then="stop")
    expect(ended(await handle.result(), Phase.ROLLED_BACK), "ROLLED_BACK", "rollback run")


@scenario("fork")
async def fork(rec: Recorder) -> None:
    """A new run starts from the rollback run's checkpoint cp-1 (recorded after `rollback`)."""
    run = scripted("saga", [{"content": "x"}, {"content": "forked"}], workspace="fork",
                   resume_from={"workflow_id": workflow_id("rollback"), "checkpoint_id": "cp-1"})
    result = await rec.run("fork", run)
    expect(ended(result, Phase.DONE), "DONE", result)


@scenario("compensation-failure")
async def compensation_failure(rec: Recorder) -> None:
    """An undo that cannot succeed: the run ends COMPENSATION_FAILED, listing the effect."""
    script = [{"tool_calls": [_write("a.txt", "x")]}, {"tool_calls": [{"name": "doomed_note", "arguments": {"note": "n"}}]},
              {"tool_calls": [{"name": "probe_fatal", "arguments": {"note": "boom"}}]}]
    result = await rec.run("compensation-failure", scripted("saga", script, workspace="cf", on_failure="rollback_all"))
    expect(isinstance(result, str) and "compensation failed" in result, "COMPENSATION_FAILED", result)


@scenario("continue-as-new")
async def continue_as_new(rec: Recorder) -> None:
    """A long run continues as new at its event bound (the recorded history is the last run)."""
    steps = [probe_call(label=str(i)) for i in range(45)]
    run = scripted("approver", steps + [{"content": "long done"}], workspace="can")
    handle = await rec.runs.start(run, workflow_id("continue-as-new"))
    result = await handle.result()
    state = await handle.state()
    expect(ended(result, Phase.DONE) and state.continued >= 1, "DONE after continuing as new", state.continued)


FAILOVER_QUEUE = "histories-failover"


@scenario("failover")
async def failover(rec: Recorder) -> None:
    """The host holding the workspace stops for good after cp-1, during a `wait`: the verification
    scheduled on its host queue is never taken (schedule-to-start timeout), the run restores cp-1 on
    the other host (`workspace.rehydrate`), undoes the ticket created since, and goes on. Two
    in-process workers on their own queue stand for the hosts (the lost one: its own workspace root)."""
    from ratchet.worker.main import build_worker

    script = [
        {"tool_calls": [_write("a.txt", "v1\n")]},
        {"tool_calls": [_ticket("after cp-1"), {"name": "wait", "arguments": {"seconds": 2}}]},
        {"tool_calls": [_write("b.txt", "v2\n")]},
        {"content": "failed over"},
    ]
    lost = rec.settings.model_copy(update={
        "task_queue": FAILOVER_QUEUE, "host_id": "histories-lost",
        "workspace_root": rec.settings.workspace_root.with_name("workspaces-lost"),
    })
    temporal = rec.runs.temporal
    async with build_worker(temporal, lost):
        runs = RatchetClient(temporal, rec.settings.model_copy(update={"task_queue": FAILOVER_QUEUE}))
        handle = await runs.start(scripted("hosts", script, workspace="failover"), workflow_id("failover"))
        await _until(handle, lambda s: any(e.tool == "create_ticket" and e.status == "done" for e in s.effects.stack.items))
    async with build_worker(temporal, rec.settings.model_copy(update={"task_queue": FAILOVER_QUEUE})):
        result = await asyncio.wait_for(handle.result(), timeout=60)
        state = await handle.state()
    expect(ended(result, Phase.DONE) and len(state.workspace.failovers) == 1, "DONE after one failover", state.workspace.failovers)


OPEN_ISSUE = [
    {"tool_calls": [{"name": "tracker__search_issues", "arguments": {"query": "printer"}}]},
    {"tool_calls": [{"name": "tracker__create_issue", "arguments": {"title": "printer on fire"}}]},
    {"content": "opened"},
]


@scenario("mcp-tools")
async def mcp_tools(rec: Recorder) -> None:
    """Tools from the README's MCP server (examples/mcp_tracker, stdio), pinned in the plan by
    digest: a search (read-only, a local activity: the server is `local`) and an issue opened
    (compensable: `close_issue` undoes it)."""
    handle = await rec.runs.start(scripted("triage", OPEN_ISSUE, workspace="mcp"), workflow_id("mcp-tools"))
    expect(ended(await asyncio.wait_for(handle.result(), 60), Phase.DONE), "DONE", "the mcp-tools run")
    history = await handle.history()
    markers = [e for e in history.events if e.HasField("marker_recorded_event_attributes")]
    expect(len(markers) == 1, "search_issues as the one local activity", len(markers))


@scenario("closed-rollback", records=rollback_id(workflow_id("mcp-tools"), TO_START))
async def closed_rollback(rec: Recorder) -> None:
    """The `RollbackWorkflow` of the closed `mcp-tools` run (recorded after it), to its start: the
    issue is closed again through the MCP server's compensating tool."""
    outcome = await asyncio.wait_for(rec.runs.get(workflow_id("mcp-tools")).rollback(TO_START), timeout=60)
    result, report = outcome.closed, outcome.report
    expect(outcome.rollback_workflow_id == recorded_id("closed-rollback"), "the recorded rollback id", outcome)
    expect(report is not None and len(report.undone) == 1 and report.clean, "the issue closed again", result)


@scenario("session")
async def session(rec: Recorder) -> None:
    """A session: the objective's turn, two asked turns (one with a tool call, one past the token
    threshold: a compaction), continuing as new between turns, a rollback to turn 2 while idle, a
    turn asked again, then close (the recorded history is the last run)."""
    script = [{"content": "one"}, probe_call(label="t2"), {"content": "two"}, {"content": "three"}]
    options = {"turns_per_run": 2, "compact_after_tokens": 100}
    run = scripted("chatter", script, workspace="session", session=options)
    handle = await rec.runs.start(run, workflow_id("session"))
    await _until(handle, lambda s: s.phase == Phase.AWAITING_MESSAGE)
    await handle.ask("question 2", message_id="q2")
    await handle.ask("question 3 " + "in detail " * 40, message_id="q3")
    await _until(handle, lambda s: s.continued >= 1 and s.phase == Phase.AWAITING_MESSAGE)
    await handle.rollback("turn-2")
    again = await handle.ask("question 3, again", message_id="q3-again")
    await handle.close()
    state = await handle.state()
    expect(
        ended(await handle.result(), Phase.DONE) and again.turn == 3 and state.session.compactions >= 1,
        "DONE after turns, a compaction and a rollback",
        (again, state.session.compactions, state.continued),
    )
