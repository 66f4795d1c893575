"""The bench harness: a dev server, worker processes measured from /proc, and one N-step run.

A worker is a fresh child process (`bench.worker_proc`), so cold starts are real and its CPU and
memory are its own. Every variant runs the same task: N steps of (model call -> one fast tool
call), then a final model call that answers.
"""

from __future__ import annotations

import json
import os
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowHandle, WorkflowHistory

from bench.floor import FLOOR_LOCAL_WORKFLOW, FLOOR_WORKFLOW
from bench.store_calls import counts_file, read_counts
from bench.worker_proc import READY
from devtools import workers
from ratchet.client import RatchetClient, RunHandle
from ratchet.contracts import AGENT_WORKFLOW, AgentResult, Phase
from ratchet.ops.settings import Settings

REPO = Path(__file__).resolve().parents[1]
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
SERVER_CONFIG = {
    # one uncut 1,000-step history to replay; Ratchet's own bound still applies elsewhere
    "limit.historyCount.suggestContinueAsNew": "200000",
    "limit.historySize.suggestContinueAsNew": "200000000",
}


@dataclass(frozen=True)
class Variant:
    name: str
    worker: str
    """`floor` or `ratchet` (bench.worker_proc kind)."""
    workflow: str
    profile: str = "bench"
    tool: str = "bench_echo"
    env: tuple[tuple[str, str], ...] = ()
    label: str = ""
    hosts: int = 1
    """2: a second worker process (another RATCHET_HOST_ID) polls the same task queue."""


VARIANTS = {
    v.name: v
    for v in (
        Variant("floor", "floor", FLOOR_WORKFLOW, label="raw SDK floor"),
        Variant("floor_local", "floor", FLOOR_LOCAL_WORKFLOW,
                label="raw SDK floor, its tool a local activity (Ratchet's step shape, none of its work)"),
        Variant("ratchet", "ratchet", AGENT_WORKFLOW, label="Ratchet, read-only tool"),
        Variant("ledger", "ratchet", AGENT_WORKFLOW, tool="bench_note", label="Ratchet, compensable tool (ledger)"),
        Variant("verify", "ratchet", AGENT_WORKFLOW, profile="bench_verify", tool="bench_note",
                label="Ratchet, compensable tool + verify/checkpoint"),
        Variant("guarded", "ratchet", AGENT_WORKFLOW, profile="bench_guarded",
                label="Ratchet, five pattern guardrails checked every step (input, tool call, answer)"),
        Variant("no_sa", "ratchet", AGENT_WORKFLOW, env=(("BENCH_SEARCH_ATTRIBUTES", "0"),),
                label="Ratchet, search-attribute upserts off"),
        Variant("no_billing", "ratchet", AGENT_WORKFLOW, env=(("BENCH_BILLING", "0"),),
                label="Ratchet, the billing ledger off (bench only)"),
        Variant("regular", "ratchet", AGENT_WORKFLOW, env=(("BENCH_LOCAL_TOOLS", "0"),),
                label="Ratchet, every tool a regular activity (RATCHET_LOCAL_TOOLS=false)"),
        Variant("workspace", "ratchet", AGENT_WORKFLOW, profile="bench_coder", tool="read_file",
                label="Ratchet, the coder's read_file (a workspace tool; the final answer verified)"),
        Variant("workspace_write", "ratchet", AGENT_WORKFLOW, profile="bench_coder_write", tool="write_file",
                label="Ratchet, the coder's write_file (ledger, effect record, undo; no verifier)"),
        Variant("workspace_2hosts", "ratchet", AGENT_WORKFLOW, profile="bench_coder", tool="read_file", hosts=2,
                label="Ratchet, read_file with a second host's worker on the same queue"),
    )
}
SMALL_FILE = "small.txt"
"""The file the read_file steps read (in the bench workspace, beside the scripts)."""
TOOL_ARGUMENTS = {
    "read_file": lambda i: {"path": SMALL_FILE},
    "write_file": lambda i: {"path": f"notes/{i % 10}.txt", "content": f"note {i}\n"},
}
"""A step's arguments by tool; the others (bench_echo, bench_note) take {"text": i}."""


def read_proc(pid: int) -> dict[str, float]:
    """CPU seconds (self + reaped children), RSS and peak RSS (MiB) of a live process."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    cpu = sum(int(x) for x in fields[11:15]) / CLOCK_TICKS  # utime, stime, cutime, cstime
    mem = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                mem[key] = int(value.split()[0]) / 1024
    return {"cpu_s": cpu, "rss_mib": mem.get("VmRSS", 0.0), "peak_rss_mib": mem.get("VmHWM", 0.0)}


def machine_load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


class WorkerProcess(workers.WorkerProcess):
    """`async with WorkerProcess(kind, address, root) as w:` a polling worker on its own task queue,
    its output in `root`/<queue>.log."""

    def __init__(self, kind: str, address: str, root: Path, env: dict[str, str] | None = None,
                 queue: str | None = None) -> None:
        self.kind, self.address, self.root = kind, address, Path(root)
        self.queue = queue or f"bench-{kind}-{uuid.uuid4().hex[:8]}"
        super().__init__(
            [sys.executable, "-m", "bench.worker_proc", kind, address, self.queue, str(self.root)],
            env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})}, cwd=REPO,
            log=self.root / f"{self.queue}{'-' + queue_host(env) if queue else ''}.log",
            ready=READY, ready_timeout=180, name=f"bench worker {kind}",
        )

    @property
    def startup_s(self) -> float:
        """Seconds from the process's start to polling, as the worker measured them (its READY line)."""
        line = self.ready_line
        return float(line.split(READY, 1)[1].split()[0]) if line else 0.0

    def stats(self) -> dict[str, float]:
        assert self.pid is not None
        return read_proc(self.pid)

    def store_calls(self) -> dict[str, int]:
        """Ledger and artifact-store calls so far, by method (a worker started with BENCH_COUNT_STORES=1)."""
        assert self.pid is not None
        return read_counts(self.pid, counts_file(self.root, self.queue))


@dataclass
class Env:
    """One bench session: the server's address and pid, a work dir, and the driver's clients: the
    raw SDK's for the floor, `ratchet.client` (over `ratchet`, a Temporal client with Ratchet's data
    converter) for Ratchet's runs."""

    address: str
    server_pid: int | None
    root: Path
    raw: Client
    ratchet: Client
    settings: Settings
    notes: list[str] = field(default_factory=list)

    def runs(self, queue: str) -> RatchetClient:
        """`ratchet.client` starting runs on `queue` (a worker's own task queue)."""
        return RatchetClient(self.ratchet, self.settings.model_copy(update={"task_queue": queue}))

    def worker(self, variant: Variant) -> WorkerProcess:
        return WorkerProcess(variant.worker, self.address, self.root, dict(variant.env))

    def other_hosts(self, variant: Variant, queue: str) -> list[WorkerProcess]:
        """The workers of a variant's other hosts, on `queue` (shared workspace directory, own host id)."""
        return [
            WorkerProcess(variant.worker, self.address, self.root, {**dict(variant.env), "RATCHET_HOST_ID": f"bench-host-{n}"},
                          queue=queue)
            for n in range(2, variant.hosts + 1)
        ]

    def server_cpu_s(self) -> float:
        return read_proc(self.server_pid)["cpu_s"] if self.server_pid else 0.0


async def connect_env(address: str, server_pid: int | None, root: Path) -> Env:
    from ratchet.worker.main import connect

    settings = Settings(temporal_address=address, artifact_dir=root / "artifacts", ledger_path=root / "ledger.sqlite3")
    return Env(address, server_pid, root, await Client.connect(address), await connect(settings), settings)


def queue_host(env: dict[str, str] | None) -> str:
    return (env or {}).get("RATCHET_HOST_ID", "")


def script(steps: int, tool: str = "bench_echo") -> list[dict[str, Any]]:
    arguments = TOOL_ARGUMENTS.get(tool, lambda i: {"text": str(i)})
    calls = [{"tool_calls": [{"name": tool, "arguments": arguments(i)}]} for i in range(steps)]
    return calls + [{"content": "done"}]


def script_file(root: Path, steps: int, tool: str = "bench_echo") -> str:
    """The scripted model's replies as a file in the bench workspace (written once), named by the
    run: like the floor's model activity, whose replies are in its code, the script stays out of
    the run input and so out of history."""
    name = f"script-{tool}-{steps}.json"
    path = root / "workspaces" / "bench" / name
    small = path.parent / SMALL_FILE
    if not small.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        small.write_text("hello\n")
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(script(steps, tool)))
        tmp.replace(path)
    return name


def workflow_input(variant: Variant, steps: int, root: Path) -> Any:
    if variant.worker == "floor":
        return steps
    return {
        "agent": variant.profile, "objective": f"bench {steps} steps", "workspace": "bench",
        "model": {"provider": "scripted", "options": {"script_file": script_file(root, steps, variant.tool)}},
        "budget": {"max_steps": steps + 1},
    }


Run = WorkflowHandle | RunHandle
"""A started run: the floor's through the raw SDK, Ratchet's through `ratchet.client` (one start
request and one result long poll each: the client adds no round trip to what is timed)."""


async def start_run(env: Env, variant: Variant, steps: int, queue: str, run_input: Any = None) -> Run:
    given = workflow_input(variant, steps, env.root) if run_input is None else run_input
    workflow_id = f"bench-{variant.name}-{steps}-{uuid.uuid4().hex[:10]}"
    if variant.worker == "floor":
        return await env.raw.start_workflow(variant.workflow, given, id=workflow_id, task_queue=queue)
    return await env.runs(queue).start(given, workflow_id)


async def run_history(run: Run) -> WorkflowHistory:
    return await (run.history() if isinstance(run, RunHandle) else run.fetch_history())


def check_result(variant: Variant, steps: int, result: Any) -> None:
    """A run that did not do its N steps must not be timed as if it had."""
    if variant.worker == "floor":
        done = result == steps
    else:
        done = isinstance(result, AgentResult) and (result.phase, result.steps) == (Phase.DONE, steps + 1)
    if not done:
        raise RuntimeError(f"{variant.name} run of {steps} steps ended wrongly: {result!r}")


async def timed_run(env: Env, variant: Variant, steps: int, queue: str) -> tuple[float, Run]:
    """Wall seconds from start request to result, as a caller sees it."""
    began = time.perf_counter()
    handle = await start_run(env, variant, steps, queue)
    check_result(variant, steps, await handle.result())
    return time.perf_counter() - began, handle


def model_activity(variant: Variant) -> str:
    return "floor.model" if variant.worker == "floor" else "model.call"
