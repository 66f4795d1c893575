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

from temporalio.client import Client, WorkflowFailureError

from ratchet.contracts import AgentResult, Phase
from ratchet.demo import SAMPLE, demo_script
from ratchet.settings import Settings
from ratchet.testing.openai_server import OpenAIServer

TASK_QUEUE = "histories"


@dataclass
class Recorder:
    client: Client
    settings: Settings
    openai: OpenAIServer
    api_key: str

    async def run(self, name: str, run: dict, seed: Path | None = None) -> AgentResult | str:
        """Run to its end: the result, or the failure message of a failed run. `seed` is copied
        into the run's workspace first."""
        if seed is not None:
            target = self.settings.workspace_root / run["workspace"]
            shutil.copytree(seed, target, ignore=shutil.ignore_patterns("__pycache__"))
        handle = await self.client.start_workflow(
            "AgentWorkflow", run, id=workflow_id(name), task_queue=TASK_QUEUE, result_type=AgentResult
        )
        try:
            return await asyncio.wait_for(handle.result(), timeout=60)
        except WorkflowFailureError as failure:
            return str(failure.cause)


Scenario = Callable[[Recorder], Awaitable[None]]
SCENARIOS: dict[str, Scenario] = {}


def scenario(name: str) -> Callable[[Scenario], Scenario]:
    def register(fn: Scenario) -> Scenario:
        SCENARIOS[name] = fn
        return fn

    return register


def workflow_id(name: str) -> str:
    return f"history-{name}"


def expect(ok: bool, what: str, got: object) -> None:
    if not ok:
        raise RuntimeError(f"expected {what}, got {got!r}")


def scripted(agent: str, script: list[dict], **extra: object) -> dict:
    return {"agent": agent, "objective": "do the task", "model": {"provider": "scripted", "script": script}, **extra}


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
    """Bad input fails the run at once, naming the field."""
    result = await rec.run("invalid-input", {"agent": "probe", "objective": "x", "budget": {"max_steps": 0}})
    expect(isinstance(result, str) and "budget.max_steps" in result, "an InvalidInput failure", result)


@scenario("model-401")
async def model_401(rec: Recorder) -> None:
    """The model endpoint answers 401: the run fails at once, not retried (local OpenAI server)."""
    rec.openai.enqueue_faults([{"status": 401}], key=rec.api_key)
    result = await rec.run("model-401", {"agent": "probe", "objective": "x", "workspace": "auth"})
    expect(isinstance(result, str) and "401" in result, "a 401 failure", result)
