"""The hostile-input catalogue: each case drives bad input through a public surface (the temporal
CLI, the SDK's raw payloads, updates, signals, queries, tool arguments from the model) and checks
that it gets a clear error, that no run is lost or stuck retrying a workflow task, that the worker
keeps serving, and that nothing outside the workspace changes.

    python -m devtools.chaos.hostile          # a private dev server and worker; prints the table

The cases are in devtools/chaos/hostile_cases.py and hostile_live.py.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError, WorkflowHandle
from temporalio.common import RawValue
from temporalio.service import RPCError

from devtools.chaos.stack import Stack, connect, task_failures, tree
from ratchet.contracts import AgentState
from devtools.devserver import DevServer, temporal_binary
from ratchet.contracts import AGENT_WORKFLOW

SENTINELS = [Path("/tmp/pwned"), Path("/tmp/x")]
"""Files a shell-injection attempt would create outside every workspace."""


@dataclass
class Outcome:
    case: str
    surface: str
    outcome: str = ""
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.problems


Case = Callable[["Probe", Outcome], Awaitable[None]]
CASES: dict[str, tuple[str, Case]] = {}


def case(name: str, surface: str) -> Callable[[Case], Case]:
    def register(fn: Case) -> Case:
        CASES[name] = (surface, fn)
        return fn

    return register


def verdict(out: Outcome, text: str, *needles: str) -> str:
    """Record the first line of `text` as the outcome; each needle must appear in `text`."""
    out.outcome = out.outcome or " ".join(text.split())[:110]
    missing = [n for n in needles if n not in text]
    if missing:
        out.problems.append(f"expected {missing} in: {text[:400]!r}")
    return text


def hostile_run(workspace: str, script: list[dict], **extra: Any) -> dict:
    return {
        "agent": "hostile", "objective": "hostile input", "workspace": workspace,
        "model": {"provider": "scripted", "options": {"script": script}, "timeout_s": 10}, **extra,
    }


def call(name: str, arguments: Any) -> dict:
    return {"name": name, "arguments": arguments}


@dataclass
class Probe:
    stack: Stack
    client: Client
    outside: Path
    """A directory outside every workspace: symlinks point here, injections aim here."""

    def wid(self, slug: str) -> str:
        return f"h-{slug}-{uuid.uuid4().hex[:6]}"

    async def cli(self, *args: str) -> tuple[int, str]:
        proc = await asyncio.create_subprocess_exec(
            temporal_binary(), *args, "--address", self.stack.address,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        )
        out, _ = await proc.communicate()
        return proc.returncode or 0, out.decode(errors="replace")

    async def cli_start(self, wid: str, text: str | None = None, file: Path | None = None) -> tuple[int, str]:
        source = ["--input", text] if file is None else ["--input-file", str(file)]
        return await self.cli(
            "workflow", "start", "--type", AGENT_WORKFLOW, "--task-queue", self.stack.task_queue,
            "--workflow-id", wid, *source,
        )

    async def start(self, wid: str, run: dict | RawValue) -> WorkflowHandle:
        return await self.client.start_workflow(AGENT_WORKFLOW, run, id=wid, task_queue=self.stack.task_queue)

    async def exists(self, wid: str) -> bool:
        try:
            await self.client.get_workflow_handle(wid).describe()
            return True
        except RPCError:
            return False

    async def finish(self, out: Outcome, wid: str, timeout_s: float = 40) -> str:
        """Wait for the run to close: 'DONE: answer' or the failure message. A run retrying a failed
        workflow task is reported (and terminated, so it does not spin on)."""
        handle = self.client.get_workflow_handle(wid)
        deadline = asyncio.get_running_loop().time() + timeout_s
        while True:
            desc = await handle.describe()
            if desc.status != WorkflowExecutionStatus.RUNNING:
                break
            failures = task_failures(await handle.fetch_history())
            if failures or asyncio.get_running_loop().time() > deadline:
                await handle.terminate(reason="hostile catalogue: stuck")
                out.problems.append(f"run stuck retrying its workflow task: {failures[:1] or 'no progress'}")
                return f"STUCK: {failures[0] if failures else 'no progress'}"
            await asyncio.sleep(0.25)
        failures = task_failures(await handle.fetch_history())
        if failures:
            out.problems.append(f"workflow task failed {len(failures)}x: {failures[0][:200]}")
        try:
            result = await handle.result()
        except WorkflowFailureError as err:
            return f"{desc.status.name}: {err.cause}"
        return f"{result.get('phase')}: {result.get('answer')}"

    async def state(self, wid: str) -> dict:
        """The state as plain JSON with every field present (payloads leave defaults out)."""
        raw = await self.client.get_workflow_handle(wid).query("state")
        return AgentState.model_validate(raw).model_dump(mode="json") if raw else raw

    async def state_or_none(self, wid: str) -> dict | None:
        try:
            return await self.state(wid)
        except Exception:  # not started yet
            return None

    async def tool_results(self, wid: str) -> list[str]:
        return [r["result"]["output"] for r in (await self.state(wid))["calls"]["tool_calls"]["items"]]

    async def tool_messages(self, wid: str) -> list[str]:
        """What the model was told for each call, including calls refused before any activity."""
        return [m["content"] for m in (await self.state(wid))["conversation"]["messages"]["items"] if m["role"] == "tool"]


async def run_catalogue(probe: Probe, names: list[str] | None = None) -> list[Outcome]:
    """Every case (concurrently), then the global checks: outside unchanged, worker serving."""
    import devtools.chaos.hostile_cases  # noqa: F401  (registers the cases)
    import devtools.chaos.hostile_live  # noqa: F401

    before, sentinels = tree(probe.outside), {p: p.exists() for p in SENTINELS}
    chosen = [n for n in CASES if names is None or n in names]
    outcomes = list(await asyncio.gather(*(_run_case(probe, name) for name in chosen)))
    outside = Outcome("nothing outside the workspace changed", "filesystem")
    after = tree(probe.outside)
    changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    created = [str(p) for p, existed in sentinels.items() if not existed and p.exists()]
    verdict(outside, f"outside tree: {len(after)} entries, changed {changed}; sentinels created {created}")
    if changed or created:
        outside.problems.append(f"changed outside the workspace: {changed + created}")
    serving = Outcome("worker keeps serving", "normal run after the catalogue")
    wid = probe.wid("normal")
    await probe.start(wid, hostile_run(wid, [{"tool_calls": [call("write_file", {"path": "ok.txt", "content": "ok"})]},
                                            {"content": "still serving"}]))
    verdict(serving, await probe.finish(serving, wid), "DONE: still serving")
    return outcomes + [outside, serving]


async def _run_case(probe: Probe, name: str) -> Outcome:
    surface, fn = CASES[name]
    out = Outcome(name, surface)
    began = time.monotonic()
    try:
        await asyncio.wait_for(fn(probe, out), timeout=90)
    except Exception as exc:  # the case itself broke: that is a finding too
        out.problems.append(f"case raised {type(exc).__name__}: {exc}"[:400])
    out.seconds = time.monotonic() - began
    return out


def table(outcomes: list[Outcome]) -> str:
    width = max(len(o.case) for o in outcomes)
    lines = [f"{'case':<{width}}  {'surface':<34}  ok    outcome"]
    for o in outcomes:
        outcome = " ".join(o.outcome.split())[:140]
        lines.append(f"{o.case:<{width}}  {o.surface[:34]:<34}  {'yes' if o.ok else 'NO ':<4}  {outcome}")
        lines += [f"{'':<{width}}  {'':<34}        problem: {p[:300]}" for p in o.problems]
    return "\n".join(lines)


def make_outside(base: Path) -> Path:
    outside = base / "outside"
    outside.mkdir(parents=True, exist_ok=True)
    (outside / "secret.txt").write_text("not for agents\n")
    (outside / "nested").mkdir(exist_ok=True)
    (outside / "nested" / "keep.bin").write_bytes(bytes(range(256)))
    return outside


async def main_async() -> int:
    with tempfile.TemporaryDirectory(prefix="ratchet-hostile-") as tmp:
        base = Path(tmp)
        server = DevServer(db_file=base / "temporal.db", log_file=base / "server.log")
        await asyncio.to_thread(server.start)
        worker = None
        try:
            from devtools.chaos.hostile_cases import WORKER_ENV  # the keys the exfiltration cases look for

            stack = Stack(base, server.address, cached_workflows=100, env=WORKER_ENV)
            worker = await stack.worker(base / "worker.log").start()
            probe = Probe(stack, await connect(server.address), make_outside(base))
            outcomes = await run_catalogue(probe)
            if not worker.alive():
                outcomes[-1].problems.append("the worker process died during the catalogue")
        finally:
            if worker is not None:
                await worker.terminate()
            await asyncio.to_thread(server.stop)
    print(table(outcomes))
    bad = [o.case for o in outcomes if not o.ok]
    print(f"hostile_inputs={len(outcomes) - len(bad)}/{len(outcomes)} ok" + (f"; failing: {bad}" if bad else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    from devtools.chaos import hostile  # the registry the cases fill is that module's, not __main__'s
    from ratchet.ops.process import exit_now

    exit_now(asyncio.run(hostile.main_async()))
