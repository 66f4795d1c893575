"""`make chaos`, two hosts (`python -m devtools.chaos --hosts 2 --runs 20`): agent runs on two worker
processes standing for two hosts; one host is SIGKILLed for good mid-run and its runs fail over to
the other; Postgres and the S3 server each go away for 10 s and come back; then the audit.

The hosts share only servers: the dev server, PostgreSQL (tests/servers.py; one database for the
ledger, RATCHET_LEDGER_URL, one for the tracker and outbox, RATCHET_TRACKER_URL) and SeaweedFS's S3
(tests/s3_server.py; artifacts: snapshots, checkpoint manifests, transcripts, RATCHET_ARTIFACT_URL).
Each worker has its own RATCHET_HOST_ID and its own directory (workspaces under `base/host-a`,
`base/host-b`); both serve one task queue and their own host queue (workflows/hosts.py).

The runs are the chaos runs (devtools/chaos/scenarios.py, scripted, no model faults) on the
`chaos_hosts` profile: every step with side effects is verified (a checkpoint with a manifest in
S3), and a workspace call its host does not take within 5 s counts the host as lost. The kill lands
once `kill_at_s` has passed and some open run's workspace is on a host: the host holding the most
open runs goes. A run bound to it fails over at its next workspace call (workflows/failover.py).

The audit (devtools/chaos/audit.py, per run): every effect left on the run's stack exists exactly
once in the shared tracker (tickets, outbox rows: `duplicate_effects`, `missing_effects`), nothing
else exists under the run's keys, and the run's final workspace holds exactly the files its
effects wrote. The workspace read is the directory on the host that holds it when that host is
alive; for a run whose workspace host was killed, the files of its last checkpoint restored from S3
through the artifact store (when no effect lies after that checkpoint), else the killed host's
directory (its disk outlives its worker; counted apart as `from_dead_disk`). `failovers` is the
number of `Failover` records in the runs' states.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowExecutionStatus

from devtools.chaos.audit import Figures, RunAudit, audit_run
from devtools.chaos.runner import start_all, state_or_none, wait_closed
from devtools.chaos.scenarios import ChaosRun, plan_runs
from devtools.chaos.stack import ROOT, Stack, connect, restarted_calls, retrying
from devtools.devserver import DevServer
from devtools.workers import WorkerProcess
from ratchet.activities.checkpoints import restore
from ratchet.client import RatchetClient
from ratchet.contracts import AgentState
from ratchet.stores.artifacts import ArtifactStore
from ratchet.stores.object_artifacts import ObjectArtifactStore
from tests.s3_server import SeaweedS3
from tests.servers import LocalPostgres

AGENT = "chaos_hosts"  # tests/plugins/chaos_tools.py
HOSTS = ("host-a", "host-b")
STORES = ("postgres", "s3")


@dataclass
class HostsOptions:
    runs: int = 20
    seed: int = 1
    spread_s: float | None = None
    """Starts are spread over this many seconds (default: one per second)."""
    kill_at_s: float | None = None
    """Kill a host this many seconds after the first start (default: 30% of the spread)."""
    outages: tuple[str, ...] = STORES
    """Stores to stop and start again, one after the other: `postgres`, `s3`."""
    outage_s: float = 10.0
    outage_at_s: float | None = None
    """The first outage begins this many seconds after the first start (default: half the spread),
    and at least a second after the kill; the next one 3 s after the previous store is back."""
    task_timeout_s: float = 5.0
    """Workflow task timeout: how long a task held by the killed worker waits before the other takes it."""
    deadline_s: float = 600.0
    base: Path | None = None


@dataclass
class Outage:
    store: str
    at_s: float
    down_s: float
    """From the stop until the server answered again."""


@dataclass
class HostFigures:
    figures: Figures
    hosts: int = len(HOSTS)
    failovers: int = 0
    killed_host: str | None = None
    kill_at_s: float | None = None
    open_runs_on_killed_host: int = 0
    """Open runs whose workspace was on the killed host at the kill."""
    outages: list[Outage] = field(default_factory=list)
    activity_retries: int = 0
    """Activity attempts after the first, in the runs' histories (a kill or an outage made them)."""
    restarted_calls: int = 0
    from_checkpoint: int = 0
    from_dead_disk: int = 0
    elapsed_s: float = 0.0
    outages_planned: int = 0

    @property
    def ok(self) -> bool:
        return (
            self.figures.ok and self.killed_host is not None and self.failovers >= 1
            and len(self.outages) == self.outages_planned
        )

    def line(self) -> str:
        f = self.figures
        return (
            f"hosts={self.hosts} runs={f.runs} completed={f.completed} lost={f.lost} "
            f"duplicate_effects={f.duplicate_effects} missing_effects={f.missing_effects} failovers={self.failovers}"
        )

    def details(self) -> str:
        f = self.figures
        outages = ",".join(f"{o.store}@{o.at_s:.0f}s/{o.down_s:.1f}s" for o in self.outages) or "none"
        return (
            f"killed={self.killed_host}@{self.kill_at_s}s holding {self.open_runs_on_killed_host} open runs; "
            f"outages={outages} compensations_ok={f.compensations_ok}/{f.compensations} residue={f.residue} "
            f"task_failures={f.task_failures} activity_retries={self.activity_retries} "
            f"restarted_calls={self.restarted_calls} workspaces_from_checkpoint={self.from_checkpoint} "
            f"from_dead_disk={self.from_dead_disk} elapsed_s={self.elapsed_s:.0f}"
        )


@dataclass
class HostsSession:
    figures: HostFigures
    audits: list[RunAudit]
    base: Path
    retry_causes: list[str]


@dataclass
class Servers:
    temporal: DevServer
    postgres: LocalPostgres
    s3: SeaweedS3

    @classmethod
    async def start(cls, base: Path) -> Servers:
        servers = cls(DevServer(db_file=base / "temporal.db", log_file=base / "server.log"), LocalPostgres(),
                      SeaweedS3(base / "s3"))
        try:
            await asyncio.gather(*(asyncio.to_thread(s.start) for s in (servers.temporal, servers.postgres, servers.s3)))
        except BaseException:
            await servers.stop()
            raise
        return servers

    async def stop(self) -> None:
        for server in (self.s3, self.postgres, self.temporal):
            await asyncio.to_thread(server.stop)

    async def outage(self, store: str, down_s: float) -> None:
        """Stop `store`'s server, wait `down_s`, start it again (same port, same data)."""
        halt, back = {"postgres": (self.postgres.halt, self.postgres.start_again),
                      "s3": (self.s3.stop, self.s3.start_again)}[store]
        await asyncio.to_thread(halt)
        await asyncio.sleep(down_s)
        await asyncio.to_thread(back)

    def stack(self, base: Path) -> Stack:
        return Stack(
            base, self.temporal.address, env=self.s3.env(),
            ledger_url=self.postgres.create_database("ratchet_ledger"),
            tracker_url=self.postgres.create_database("tracker"),
            artifact_url=f"s3://{self.s3.bucket}/chaos",
        )


async def run_hosts(opts: HostsOptions, log: Callable[[str], None] = print) -> HostsSession:
    base = opts.base or ROOT / ".ratchet" / "chaos" / time.strftime("hosts-%Y%m%d-%H%M%S")
    base.mkdir(parents=True, exist_ok=True)
    spread = opts.spread_s if opts.spread_s is not None else float(opts.runs)
    began = time.monotonic()
    servers = await Servers.start(base)
    workers: dict[str, WorkerProcess] = {}
    try:
        stack = servers.stack(base)
        hosts = [stack.on_host(name) for name in HOSTS]
        log(f"chaos: {opts.runs} runs on {len(hosts)} hosts in {base}, task queue {stack.task_queue}")
        started = await asyncio.gather(*(h.worker(base / "logs" / f"worker-{h.host_id}.log").start() for h in hosts))
        workers = {h.host_id: w for h, w in zip(hosts, started)}
        client = await connect(servers.temporal.address)
        ratchet = RatchetClient(client, stack.settings())
        runs = plan_runs(opts.runs, random.Random(opts.seed), 0.0, f"hosts-{stack.task_queue[-6:]}", AGENT)
        figures = HostFigures(Figures(), outages_planned=len(opts.outages))
        t0 = time.monotonic()
        starter = asyncio.create_task(start_all(client, stack, runs, spread, opts.task_timeout_s))
        killed = asyncio.Event()
        killer = asyncio.create_task(_kill_a_host(
            ratchet, runs, hosts, workers, t0, opts.kill_at_s if opts.kill_at_s is not None else spread * 0.3, figures,
            killed, log,
        ))
        outages = asyncio.create_task(_outages(servers, opts, spread, t0, figures, killed, log))
        await wait_closed(ratchet, runs, t0, opts.deadline_s, log,
                          lambda: f"killed {figures.killed_host or '-'}, outages {len(figures.outages)}")
        for task in (starter, killer, outages):
            await task
        artifacts = ObjectArtifactStore.from_url(stack.artifact_url or "", **servers.s3.store_config())
        audits, retry_causes = await _audit_all(ratchet, hosts, runs, figures, artifacts, base)
        figures.restarted_calls = len(restarted_calls(stack.ledger_url or stack.ledger_path))
    finally:
        for worker in workers.values():
            await worker.terminate()  # the killed one has exited already
        await servers.stop()
    figures.figures = Figures.of(audits, opts.runs)
    figures.elapsed_s = time.monotonic() - began
    session = HostsSession(figures, audits, base, retry_causes)
    (base / "report.json").write_text(json.dumps(_report(session), indent=2))
    return session


async def _kill_a_host(
    client: RatchetClient, runs: list[ChaosRun], hosts: list[Stack], workers: dict[str, WorkerProcess], t0: float,
    at_s: float, figures: HostFigures, killed: asyncio.Event, log: Callable[[str], None],
) -> None:
    """At `at_s`, once some open run's workspace is on a host, SIGKILL the host holding the most
    open runs; it never comes back."""
    await asyncio.sleep(max(0.0, at_s - (time.monotonic() - t0)))
    while True:
        held = await _open_runs_by_host(client, runs, hosts)
        if any(held.values()) or time.monotonic() - t0 > at_s + 120:
            break
        await asyncio.sleep(0.2)
    victim = max(hosts, key=lambda h: len(held[h.host_id]))
    workers[victim.host_id].kill()
    figures.killed_host, figures.kill_at_s = victim.host_id, round(time.monotonic() - t0, 1)
    figures.open_runs_on_killed_host = len(held[victim.host_id])
    killed.set()
    log(f"chaos: {figures.kill_at_s}s SIGKILLed {victim.host_id}, which held {figures.open_runs_on_killed_host} open runs")


async def _open_runs_by_host(client: RatchetClient, runs: list[ChaosRun], hosts: list[Stack]) -> dict[str, list[str]]:
    """{host id: open runs whose workspace is on that host}, from the runs' states (a directory
    alone does not tell: a tool on the shared queue opens the run's directory wherever it runs)."""
    async def host_of(run: ChaosRun) -> str | None:
        handle = client.get(run.workflow_id)
        try:
            if not await handle.running():
                return None
            state = await asyncio.wait_for(handle.state(), timeout=5)
        except Exception:  # not started yet, or no worker answered in time
            return None
        return state.workspace.host

    queues = await asyncio.gather(*(host_of(run) for run in runs))
    return {
        h.host_id or "": [run.workflow_id for run, queue in zip(runs, queues) if queue == h.host_queue] for h in hosts
    }


async def _outages(
    servers: Servers, opts: HostsOptions, spread: float, t0: float, figures: HostFigures, killed: asyncio.Event,
    log: Callable[[str], None],
) -> None:
    """After the kill (so the failovers meet the outages), each store in turn."""
    at = opts.outage_at_s if opts.outage_at_s is not None else spread * 0.5
    await killed.wait()
    at = max(at, time.monotonic() - t0 + 1.0)
    for store in opts.outages:
        await asyncio.sleep(max(0.0, at - (time.monotonic() - t0)))
        begun = time.monotonic()
        await servers.outage(store, opts.outage_s)
        outage = Outage(store, round(begun - t0, 1), round(time.monotonic() - begun, 1))
        figures.outages.append(outage)
        log(f"chaos: {outage.at_s}s {store} stopped; back after {outage.down_s}s")
        at = time.monotonic() - t0 + 3.0


async def _audit_all(
    client: RatchetClient, hosts: list[Stack], runs: list[ChaosRun], figures: HostFigures, artifacts: ArtifactStore,
    base: Path,
) -> tuple[list[RunAudit], list[str]]:
    """Each run against the shared tracker and its final workspace (see the module); with the
    failovers in the runs' states and the causes of every activity retry in their histories."""
    audits, causes = [], []
    for run in runs:
        handle = client.get(run.workflow_id)
        try:
            desc = await retrying(handle.describe, what="describe")
            if desc.status == WorkflowExecutionStatus.RUNNING:
                audits.append(RunAudit(run.workflow_id, run.kind, note="still running at the deadline: lost"))
                continue
            state = await retrying(lambda: state_or_none(handle), what="query state")
            history = await retrying(handle.history, what="fetch history")
        except Exception as exc:
            audits.append(RunAudit(run.workflow_id, run.kind, note=f"cannot read the run: {exc}"))
            continue
        owner = next((h for h in hosts if state is not None and h.host_queue == state.workspace.host), hosts[0])
        directory = None
        if state is not None and owner.host_id == figures.killed_host:
            directory = _from_checkpoint(state, artifacts, base / "audit" / run.workflow_id)
            figures.from_checkpoint += directory is not None
            figures.from_dead_disk += directory is None
        audits.append(audit_run(owner, run, state, history, directory))
        if desc.close_time is not None:
            audits[-1].note = f"closed after {(desc.close_time - desc.start_time).total_seconds():.1f}s"
        figures.failovers += len(state.workspace.failovers) if state is not None else 0
        causes += _retry_causes(history)
    figures.activity_retries = len(causes)
    return audits, causes


def _from_checkpoint(state: AgentState, artifacts: ArtifactStore, directory: Path) -> Path | None:
    """The run's last checkpoint restored into `directory` from the artifact store, if no effect of
    the run lies after it (its workspace then is that checkpoint's files); else None."""
    last = next((c for c in reversed(state.effects.checkpoints.items) if c.workspace_ref is not None), None)
    if last is None or last.effects_len != len(state.effects.stack.items):
        return None
    directory.mkdir(parents=True, exist_ok=True)
    restore(directory, artifacts, last.workspace_ref)
    return directory


def _retry_causes(history) -> list[str]:
    """`activity type: last failure` of every activity attempt after the first."""
    types: dict[int, str] = {}
    out = []
    for event in history.events:
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            types[event.event_id] = event.activity_task_scheduled_event_attributes.activity_type.name
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            attrs = event.activity_task_started_event_attributes
            if attrs.attempt > 1:
                out.append(f"{types.get(attrs.scheduled_event_id, '?')}: {attrs.last_failure.message[:200]}")
    return out


def _report(session: HostsSession) -> dict:
    figures = asdict(session.figures)
    return {
        "figures": figures,
        "line": session.figures.line(),
        "details": session.figures.details(),
        "retry_causes": session.retry_causes,
        "runs": [asdict(a) for a in session.audits],
    }
