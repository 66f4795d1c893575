"""Saga sweep: a scripted run with side effects (files, tracker tickets, outbox messages) and some
checkpoints; for each step k, the same run with a non-retryable failure injected at step k.

After each rollback the outside world must equal its state at the last checkpoint before k, byte
for byte: the workspace files (including bytes that were there before the run), the run's tracker
rows and outbox rows, and nothing else (no temporary files, no extra rows). Then every undo the
rollback ran is run a second time, once through the ledger and once around it (a fresh ledger, so
the undo functions really act again): the world must not change.

    python -m devtools.chaos.saga_sweep        # a private dev server and worker; prints saga_sweep=K/K clean
"""

from __future__ import annotations

import asyncio
import os
import logging
import tempfile
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from ratchet.payloads.converter import BASE_CONVERTER
from temporalio.testing import ActivityEnvironment

from devtools.chaos.audit import TMP_SUFFIX
from devtools.chaos.scenarios import BROKEN, fail, send, ticket, write
from devtools.chaos.stack import Stack, connect, rows, task_failures, tree
from ratchet.client import RatchetClient, RunFailed, RunHandle
from ratchet.contracts import AgentState, Phase, UndoInvocation

SEED = {"a.txt": b"bytes from before the run \x00\xff\r\n"}
STEPS: list[list[dict]] = [
    [write("a.txt", "v1\n"), ticket("t1", "first")],
    [write("a.txt", "v2 \u00fcn\u00efc\u00f8d\u00e9\n"), write("b.txt", "b2\n"), send("ops", "m2")],
    [write(BROKEN, "verification fails"), ticket("t3"), write("c.txt", "c3")],  # not a checkpoint
    [write("a.txt", "v4\n"), send("ops", "m4")],  # not a checkpoint: BROKEN is still non-empty
    [write(BROKEN, ""), ticket("t5", "recovered")],
    [write("d/e.txt", "nested\n"), send("ops", "m6"), write("b.txt", "b6\n")],
]


@dataclass
class World:
    files: dict[str, bytes | str]
    tickets: list[tuple[str, str, str]]
    outbox: list[tuple[str, str, str]]


@dataclass
class StepResult:
    k: int
    injected: str
    checkpoint: str | None = None
    undone: int = 0
    problems: list[str] = field(default_factory=list)
    residue: list[str] = field(default_factory=list)
    """Left in the workspace after the rollback: temporary files, empty directories."""

    @property
    def clean(self) -> bool:
        return not self.problems and not self.residue


def expected(steps: int) -> tuple[World, list[int]]:
    """The world after `steps` steps of STEPS, and which steps were checkpoints."""
    world = World(dict(SEED), [], [])
    checkpoints = []
    for step, calls in enumerate(STEPS[:steps], start=1):
        for j, c in enumerate(calls):
            key, args = f"/{step}/call_{step}_{j}", c["arguments"]
            if c["name"] == "write_file":
                world.files[args["path"]] = args["content"].encode()
            elif c["name"] == "create_ticket":
                world.tickets.append((key, args["title"], args["body"]))
            elif c["name"] == "outbox_send":
                world.outbox.append((key, args["to"], args["body"]))
        if not world.files.get(BROKEN):
            checkpoints.append(step)
    return world, checkpoints


def observe(stack: Stack, wid: str) -> World:
    """The run's outside world, without residue (temporary files, empty directories: see residue())."""
    prefix = len(wid)
    strip = lambda found: [(key[prefix:], a, b) for key, a, b in found]  # noqa: E731
    files = {path: data for path, data in tree(stack.workspace(wid)).items() if not path.endswith(TMP_SUFFIX)}
    return World(
        files,
        strip(rows(stack.tracker_path, "tickets", f"{wid}/")),
        strip(rows(stack.tracker_path, "outbox", f"{wid}/")),
    )


def residue(root: Path) -> list[str]:
    """Temporary files and empty directories left in a workspace."""
    found = [str(p.relative_to(root)) + "/" for p in root.rglob("*") if p.is_dir() and not any(p.iterdir())]
    return sorted(found + [path for path in tree(root) if path.endswith(TMP_SUFFIX)])


def script_failing_at(k: int | None) -> list[dict]:
    """STEPS with a fatal call added to step k: odd k a tool that fails before acting, even k
    an outbox send that acts and then fails (its effect happened; its undo must still run)."""
    script = [{"tool_calls": list(calls)} for calls in STEPS]
    if k is not None:
        bad = fail(f"injected at step {k}") if k % 2 else send("ops", f"doomed {k}", fatal_after_send=True)
        script[k - 1]["tool_calls"].append(bad)
    return script + [{"content": "all steps done"}]


async def sweep(client: Client, stack: Stack) -> list[StepResult]:
    """Every k, plus the run without a failure (which checks the expected checkpoints)."""
    from ratchet.worker.main import build_worker

    settings = stack.settings()
    os.environ.update(stack.tracker().environment())  # the tracker tools of this in-process worker read them
    async with build_worker(client, settings, graceful_shutdown_timeout=timedelta(0)):
        runs = RatchetClient(client, settings)
        return list(await asyncio.gather(*(_one(runs, stack, k) for k in [None, *range(1, len(STEPS) + 1)])))


async def _one(client: RatchetClient, stack: Stack, k: int | None) -> StepResult:
    wid = f"sweep-{stack.task_queue[-6:]}-{k or 'none'}"
    result = StepResult(k or 0, "nothing" if k is None else ("chaos_fail" if k % 2 else "outbox_send fatal_after_send"))
    stack.workspace(wid).mkdir(parents=True, exist_ok=True)
    for name, data in SEED.items():
        (stack.workspace(wid) / name).write_bytes(data)
    run = {"agent": "chaos", "objective": f"saga sweep k={k}", "workspace": wid,
           "model": {"provider": "scripted", "options": {"script": script_failing_at(k)}}}
    handle = await client.start(run, wid)
    try:
        await asyncio.wait_for(handle.result(), timeout=120)
    except RunFailed:
        pass
    state = await handle.state()
    result.problems += [f"workflow task failed: {m[:200]}" for m in task_failures(await handle.history())]
    if k is None:
        _check_full_run(stack, wid, state, result)
        return result
    _check_rollback(stack, wid, k, state, result)
    before = observe(stack, wid)
    for label, fresh in (("through the ledger", False), ("around the ledger", True)):
        again = await _undo_again(stack, handle, fresh)
        if again != result.undone:
            result.problems.append(f"ran {again} undos again {label}, the rollback reported {result.undone}")
        if observe(stack, wid) != before:
            result.problems.append(f"running the undos again {label} changed the world: {observe(stack, wid)}")
    return result


def _check_full_run(stack: Stack, wid: str, state: AgentState, result: StepResult) -> None:
    world, checkpoints = expected(len(STEPS))
    if state.phase != Phase.DONE:
        result.problems.append(f"the run without a failure ended {state.phase}: {state.last_error}")
    if [c.step for c in state.effects.checkpoints.items] != checkpoints:
        result.problems.append(f"checkpoints at steps {[c.step for c in state.effects.checkpoints.items]}, expected {checkpoints}")
    if observe(stack, wid) != world:
        result.problems.append(f"final world differs: {observe(stack, wid)} != {world}")


def _check_rollback(stack: Stack, wid: str, k: int, state: AgentState, result: StepResult) -> None:
    _, checkpoint_steps = expected(k - 1)
    last = checkpoint_steps[-1] if checkpoint_steps else 0
    want, _ = expected(last)
    report = state.effects.rollbacks[-1] if state.effects.rollbacks else None
    result.checkpoint = report.checkpoint_id if report else None
    result.undone = len(report.undone) if report else 0
    want_cp = f"cp-{len(checkpoint_steps)}" if checkpoint_steps else None
    if state.phase != Phase.FAILED or report is None or not report.clean:
        result.problems.append(f"ended {state.phase}, rollback {report}")
    elif report.checkpoint_id != want_cp:
        result.problems.append(f"rolled back to {report.checkpoint_id}, expected {want_cp}")
    found = observe(stack, wid)
    result.residue = residue(stack.workspace(wid))
    for part in ("files", "tickets", "outbox"):
        if getattr(found, part) != getattr(want, part):
            result.problems.append(f"{part} after the rollback: {getattr(found, part)} != {getattr(want, part)}")


async def _undo_again(stack: Stack, handle: RunHandle, fresh_ledger: bool) -> int:
    """Re-run, newest first as the rollback did, every undo activity in the run's history."""
    import ratchet.activities.tracker_tools  # noqa: F401  (register the built-in tools)
    import ratchet.activities.workspace_tools  # noqa: F401
    from ratchet.stores.ledger import SqliteLedger
    from ratchet.activities.tools import ToolActivities
    from ratchet.stores.artifacts import DirectoryArtifactStore
    from ratchet.core.tools import default_registry

    with tempfile.TemporaryDirectory() as tmp:
        ledger = SqliteLedger(Path(tmp) / "fresh.sqlite3" if fresh_ledger else stack.ledger_path)
        acts = ToolActivities(default_registry, stack.workspace_root, DirectoryArtifactStore(stack.artifact_dir),
                              ledger, stack.settings())
        history = await handle.history()
        count = 0
        for event in history.events:
            if event.event_type != EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
                continue
            attrs = event.activity_task_scheduled_event_attributes
            if not attrs.activity_type.name.startswith("undo."):
                continue
            inv = BASE_CONVERTER.payload_converter.from_payload(attrs.input.payloads[0], UndoInvocation)
            await ActivityEnvironment().run(acts.undo, default_registry.get(inv.tool), inv)
            count += 1
    return count


def summary(results: list[StepResult]) -> str:
    swept = [r for r in results if r.k]
    clean = sum(r.clean for r in swept)
    full = next((r for r in results if not r.k), None)
    note = "" if full is None or full.clean else " (the run without a failure is not as expected)"
    return f"saga_sweep={clean}/{len(swept)} {'clean' if clean == len(swept) and not note else 'NOT clean'}{note}"


def report_lines(results: list[StepResult]) -> list[str]:
    lines = []
    for r in results:
        head = "no failure: checkpoints and final world as simulated"
        if r.k:
            head = f"k={r.k} inject {r.injected}: rolled back to {r.checkpoint or 'the start'}, undid {r.undone}"
        lines.append(f"  {head} -> {'clean' if r.clean else 'NOT clean'}")
        lines += [f"      problem: {p[:400]}" for p in r.problems]
        lines += [f"      residue: {', '.join(r.residue)}"] if r.residue else []
    return lines


async def main_async() -> int:
    for name in ("temporalio", "ratchet.activity"):  # the injected failures are expected: do not log them
        logging.getLogger(name).setLevel(logging.ERROR)
    import tests.plugins.chaos_tools  # noqa: F401  (the chaos profile and the outbox tool)
    from devtools.devserver import DevServer

    with tempfile.TemporaryDirectory(prefix="ratchet-sweep-") as tmp:
        base = Path(tmp)
        server = DevServer(db_file=base / "temporal.db", log_file=base / "server.log")
        await asyncio.to_thread(server.start)
        try:
            results = await sweep(await connect(server.address), Stack(base, server.address))
        finally:
            await asyncio.to_thread(server.stop)
    print("\n".join(report_lines(results)))
    line = summary(results)
    print(line)
    return 0 if line.endswith(" clean") and "NOT" not in line else 1


if __name__ == "__main__":
    from ratchet.ops.process import exit_now

    exit_now(asyncio.run(main_async()))
