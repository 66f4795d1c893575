"""`make chaos`: agent runs under a worker that is SIGKILLed at random moments, one dev server
restart, and a model endpoint that fails often; then the audit (devtools/chaos/audit.py).

Everything is real: `temporal server start-dev` on a SQLite file that survives the restart,
`python -m ratchet.worker` processes, the openai client against ratchet.testing.openai_server, SQLite
tracker and outbox, files on disk.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import timedelta
from pathlib import Path

from temporalio.client import Client
from temporalio.exceptions import WorkflowAlreadyStartedError

from devtools.chaos.audit import Figures, RunAudit, audit_run
from devtools.chaos.scenarios import MODEL_SCRIPT, ChaosRun, plan_runs
from devtools.chaos.stack import ROOT, Stack, connect, restarted_calls, retrying
from devtools.chaos.supervisor import Supervisor
from devtools.devserver import DevServer
from ratchet.client import NotStartedYet, RatchetClient, RunHandle
from ratchet.contracts import AGENT_WORKFLOW, AgentState
from ratchet.testing.openai_server import OpenAIServer


@dataclass
class Options:
    runs: int = 50
    seed: int = 1
    model_share: float = 0.3
    """Share of runs driven by the openai provider against the faulty endpoint."""
    fault_rate: float = 0.3
    """Share of model requests answered with 429, 500, a timeout, a truncated body or bad tool JSON."""
    first_faults: tuple[str, ...] = ()
    """Fault kinds served to the first model requests, whatever the rate (a short run still sees them)."""
    kill_every: tuple[float, float] = (4.0, 15.0)
    kills: bool = True
    restart_server: bool = True
    spread_s: float | None = None
    """Starts are spread over this many seconds (default: one per second)."""
    max_kills: int | None = None
    task_timeout_s: float | None = None
    """Workflow task timeout of the runs (Temporal's default is 10 s): how long a task handed to a
    worker that was just killed waits before it goes to the next one."""
    deadline_s: float = 900.0
    base: Path | None = None
    agent: str = "chaos"
    """`chaos` verifies every step (checkpoints); `chaos_quick` does not, so a failing run rolls back
    everything, and no verification is in flight when the worker dies (see docs/RELIABILITY.md)."""


@dataclass
class Session:
    figures: Figures
    audits: list[RunAudit]
    base: Path
    kill_times: list[float]
    model_stats: dict


async def run_chaos(opts: Options, log: Callable[[str], None] = print) -> Session:
    base = opts.base or ROOT / ".ratchet" / "chaos" / time.strftime("%Y%m%d-%H%M%S")
    base.mkdir(parents=True, exist_ok=True)
    rng = random.Random(opts.seed)
    spread = opts.spread_s if opts.spread_s is not None else float(opts.runs)
    server = DevServer(db_file=base / "temporal.db", log_file=base / "server.log")
    model = OpenAIServer(replies=MODEL_SCRIPT, fault_rate=opts.fault_rate, seed=opts.seed)
    model.fault_templates["timeout"] = {"timeout": 4.0}  # the runs' client timeout is 2 s
    model.enqueue_faults([model.fault_templates[kind] for kind in opts.first_faults])
    await asyncio.to_thread(server.start)
    model.start()
    stack = Stack(base, server.address, env={"OPENAI_BASE_URL": model.base_url, "OPENAI_API_KEY": "chaos-key"})
    supervisor = Supervisor(
        stack, base / "logs", opts.kill_every, rng=random.Random(opts.seed + 1), max_kills=opts.max_kills
    )
    started = time.monotonic()
    try:
        log(f"chaos: {opts.runs} runs in {base}, server {server.address}, task queue {stack.task_queue}")
        await supervisor.ensure_worker()
        client = await connect(server.address)
        runs = plan_runs(opts.runs, rng, opts.model_share, f"chaos-{stack.task_queue[-6:]}", opts.agent)
        stop = asyncio.Event()
        killer = asyncio.create_task(supervisor.chaos(stop)) if opts.kills else None
        starter = asyncio.create_task(start_all(client, stack, runs, spread, opts.task_timeout_s))
        restarts = asyncio.create_task(_restart(server, spread / 2, log)) if opts.restart_server else None
        ratchet = RatchetClient(client, stack.settings())
        await wait_closed(ratchet, runs, started, opts.deadline_s, log, lambda: f"worker kills {supervisor.kills}")
        await starter
        stop.set()
        for task in (killer, restarts):
            if task is not None:
                await task
        await supervisor.ensure_worker()  # queries on closed runs replay on a worker
        audits = [await _audit(ratchet, stack, run) for run in runs]
    finally:
        await supervisor.shutdown()
        model.stop()
        await asyncio.to_thread(server.stop)
    figures = Figures.of(audits, opts.runs)
    figures.kills, figures.server_restarts = supervisor.kills, int(opts.restart_server)
    figures.model_faults = sum(model.stats()["count_by_fault"].values())
    figures.restarted_calls = len(restarted_calls(stack.ledger_path))
    figures.elapsed_s = time.monotonic() - started
    session = Session(figures, audits, base, supervisor.kill_times, model.stats())
    (base / "report.json").write_text(json.dumps(_report(session), indent=2))
    return session


async def start_all(
    client: Client, stack: Stack, runs: list[ChaosRun], spread: float, task_timeout_s: float | None
) -> None:
    gap = spread / max(len(runs), 1)
    timeout = timedelta(seconds=task_timeout_s) if task_timeout_s else None
    for run in runs:
        await retrying(lambda run=run: _start(client, stack, run, timeout), what=f"start {run.workflow_id}")
        await asyncio.sleep(gap)


async def _start(client: Client, stack: Stack, run: ChaosRun, task_timeout: timedelta | None) -> None:
    """Through the raw SDK: `--task-timeout` sets the runs' workflow task timeout, a start option
    `ratchet.client` does not offer (a chaos knob, not a user's)."""
    try:
        await client.start_workflow(
            AGENT_WORKFLOW, run.input, id=run.workflow_id, task_queue=stack.task_queue, task_timeout=task_timeout
        )
    except WorkflowAlreadyStartedError:
        pass  # the first attempt reached the server before it went away


async def _restart(server: DevServer, after_s: float, log: Callable[[str], None]) -> None:
    """Stop the dev server (its SQLite file stays) and start it again on the same port."""
    await asyncio.sleep(after_s)
    began = time.monotonic()
    await asyncio.to_thread(server.stop)
    await asyncio.to_thread(server.start)
    log(f"chaos: dev server restarted on {server.address} in {time.monotonic() - began:.1f}s")


async def wait_closed(
    client: RatchetClient, runs: list[ChaosRun], started: float, deadline_s: float, log: Callable[[str], None],
    status: Callable[[], str],
) -> None:
    """Until every run is closed or `deadline_s` has passed; a progress line every 15 s."""
    open_ids = {run.workflow_id for run in runs}
    last_note = 0.0
    while open_ids and time.monotonic() - started < deadline_s:
        await asyncio.sleep(1.0)
        for wid in sorted(open_ids):
            try:
                running = await asyncio.wait_for(client.get(wid).running(), timeout=10)
            except Exception:  # not started yet, or the server is restarting: ask again later
                continue
            if not running:
                open_ids.discard(wid)
        elapsed = time.monotonic() - started
        if elapsed - last_note >= 15:
            last_note = elapsed
            closed = len(runs) - len(open_ids)
            log(f"chaos: {elapsed:4.0f}s  closed {closed}/{len(runs)}  {status()}")


async def _audit(client: RatchetClient, stack: Stack, run: ChaosRun) -> RunAudit:
    handle = client.get(run.workflow_id)
    try:
        if await retrying(handle.running, what="describe"):
            return RunAudit(run.workflow_id, run.kind, note="still running at the deadline: lost")
        state = await retrying(lambda: state_or_none(handle), what="query state")
        history = await retrying(handle.history, what="fetch history")
    except Exception as exc:
        return RunAudit(run.workflow_id, run.kind, note=f"cannot read the run: {exc}")
    return audit_run(stack, run, state, history)


async def state_or_none(handle: RunHandle) -> AgentState | None:
    """The run's state, None if it never ran its first workflow task."""
    try:
        return await handle.state()
    except NotStartedYet:
        return None


def _report(session: Session) -> dict:
    return {
        "figures": asdict(session.figures),
        "kill_times_s": session.kill_times,
        "model_endpoint": session.model_stats,
        "runs": [asdict(a) for a in session.audits],
    }


def problems(session: Session) -> list[str]:
    """One line for each run the audit did not find clean."""
    return audit_problems(session.audits)


def audit_problems(audits: list[RunAudit]) -> list[str]:
    out = []
    for a in audits:
        if a.clean:
            continue
        detail = "; ".join(filter(None, [
            a.note, f"phase {a.phase}" if not a.completed else "",
            f"missing {a.missing}" if a.missing else "", f"extra {a.extra}" if a.extra else "",
            f"residue {a.residue}" if a.residue else "", "compensation not clean" if a.compensation_ok is False else "",
            f"workflow task failures {a.task_failures[:2]}" if a.task_failures else "",
        ]))
        out.append(f"  {a.workflow_id} ({a.kind}): {detail}")
    return out
