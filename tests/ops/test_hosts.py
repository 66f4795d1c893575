"""Workspaces across hosts, with real worker processes (`python -m ratchet.worker`) standing for
two hosts: each its own RATCHET_HOST_ID and RATCHET_WORKSPACE_ROOT (no shared workspace directory),
both on one task queue, sharing the ledger, the artifact store and the tracker.

- every workspace call of a run lands on the host that opened its workspace;
- the host holding a run's workspace is SIGKILLed for good: the run fails over to the other host
  from its last checkpoint (or, without one, from its initial snapshot), undoes the tracker ticket
  created since exactly once, redoes the work, and ends DONE.
"""

from __future__ import annotations

import asyncio
import sqlite3
from dataclasses import dataclass
from pathlib import Path

import pytest

from devtools.workers import WorkerProcess
from ratchet.activities.tracker_tools import TrackerSettings
from ratchet.client import RunFailed, RunHandle
from ratchet.client.shadows import Candidate
from ratchet.contracts import AgentState, EffectStatus, Phase
from ratchet.ops.settings import Settings
from tests.ops_workers import start_worker
from tests.runs import activity_attempts, runs, scripted, start, wait_for

pytestmark = pytest.mark.e2e  # processes as a user runs them: `make test-e2e`, not `make test`

WORKSPACE = "shared-name"
WAIT_S = 2
"""The `wait` timer (no worker involved) during which a test kills the workspace's host."""


@dataclass
class Host:
    id: str
    root: Path
    queue: str
    worker: WorkerProcess

    def files(self) -> dict[str, str]:
        workspace = self.root / WORKSPACE
        if not workspace.exists():
            return {}
        return {str(p.relative_to(workspace)): p.read_text() for p in sorted(workspace.rglob("*")) if p.is_file()}


@pytest.fixture
async def hosts(settings: Settings, tmp_path: Path):
    async def one(host_id: str) -> Host:
        root = tmp_path / f"root-{host_id}"
        worker = await start_worker(settings, RATCHET_HOST_ID=host_id, RATCHET_WORKSPACE_ROOT=str(root))
        return Host(host_id, root, f"{settings.task_queue}@{host_id}", worker)

    both = await asyncio.gather(one("host-a"), one("host-b"))
    try:
        yield both
    finally:
        for host in both:
            host.worker.kill()


def owner_and_other(state: AgentState, hosts: list[Host]) -> tuple[Host, Host]:
    [owner] = [h for h in hosts if h.queue == state.workspace.host]
    [other] = [h for h in hosts if h is not owner]
    return owner, other


def write(path: str, content: str) -> dict:
    return {"name": "write_file", "arguments": {"path": path, "content": content}}


def ticket_and_wait(title: str) -> dict:
    return {"tool_calls": [{"name": "create_ticket", "arguments": {"title": title}},
                           {"name": "wait", "arguments": {"seconds": WAIT_S}}]}


async def scheduled_on(handle: RunHandle) -> list[tuple[str, str, str]]:
    """(activity type, task queue, identity of the worker that started it) of every activity."""
    scheduled: dict[int, tuple[str, str]] = {}
    found = []
    for event in (await handle.history()).events:
        if event.HasField("activity_task_scheduled_event_attributes"):
            attrs = event.activity_task_scheduled_event_attributes
            scheduled[event.event_id] = (attrs.activity_type.name, attrs.task_queue.name)
        if event.HasField("activity_task_started_event_attributes"):
            attrs = event.activity_task_started_event_attributes
            found.append((*scheduled[attrs.scheduled_event_id], attrs.identity))
    return found


def tracker(settings: Settings) -> tuple[list[tuple[int, str]], int]:
    """The tickets (id, title) and how many were ever created (AUTOINCREMENT's sequence)."""
    with sqlite3.connect(TrackerSettings().path) as conn:
        rows = conn.execute("SELECT id, title FROM tickets ORDER BY id").fetchall()
        (created,) = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'tickets'").fetchone()
    return rows, created


async def kill_owner_during_the_wait(handle: RunHandle, hosts: list[Host]) -> tuple[Host, Host]:
    """Once the ticket of the second step is recorded (the run is then in its `wait` timer, nothing
    in flight on any worker), SIGKILL the host holding the workspace; it never comes back."""
    state = await wait_for(
        handle, lambda s: any(e.tool == "create_ticket" and e.status == EffectStatus.DONE for e in s.effects.stack.items)
    )
    owner, other = owner_and_other(state, hosts)
    owner.worker.kill()
    return owner, other


async def test_every_workspace_call_lands_on_the_host_that_opened_the_workspace(client, settings, hosts):
    script = [
        {"tool_calls": [write("a.txt", "one\n")]},
        {"tool_calls": [write("b/c.txt", "two\n"), {"name": "read_file", "arguments": {"path": "a.txt"}}]},
        {"tool_calls": [{"name": "list_files", "arguments": {}}]},
        {"content": "done"},
    ]
    handle = await start(client, settings, scripted("hosts", script, workspace=WORKSPACE))
    result = await asyncio.wait_for(handle.result(), 30)
    state = await handle.state()
    assert result.phase == Phase.DONE, result.last_error
    owner, other = owner_and_other(state, hosts)
    assert result.workspace_host == owner.queue and not state.workspace.failovers

    assert owner.files() == {"a.txt": "one\n", "b/c.txt": "two\n"}
    assert other.files() == {}, "nothing of the run's workspace on the other host"
    assert state.workspace.snapshot is not None and len(state.effects.checkpoints.items) == 2

    activities = await scheduled_on(handle)
    workspace_calls = [a for a in activities if a[0].startswith("tool.") or a[0] == "checkpoint.verify"]
    assert len(workspace_calls) == 6  # 4 tool calls, 2 verifications
    owner_pid = f"{owner.worker.pid}@"
    for kind, queue, identity in workspace_calls:
        assert queue == owner.queue and identity.startswith(owner_pid), (kind, queue, identity)
    for kind, queue, _ in activities:
        if kind in ("workspace.open", "model.call", "run.prepare"):
            assert queue == settings.task_queue, (kind, queue)


async def test_a_lost_host_fails_over_from_the_last_checkpoint(client, settings, hosts):
    script = [
        {"tool_calls": [write("a.txt", "v1\n")]},  # verified: cp-1
        ticket_and_wait("after cp-1"),  # the host is killed here; its verification never starts
        {"tool_calls": [write("b.txt", "v2\n")]},
        {"content": "done"},
    ]
    handle = await start(client, settings, scripted("hosts", script, workspace=WORKSPACE))
    owner, other = await kill_owner_during_the_wait(handle, hosts)
    result = await asyncio.wait_for(handle.result(), 60)
    state = await handle.state()
    assert result.phase == Phase.DONE, result.last_error

    [failover] = state.workspace.failovers
    assert (failover.from_host, failover.to_host, failover.checkpoint_id) == (owner.queue, other.queue, "cp-1")
    assert failover.step == 2 and "verify" in failover.reason
    assert [u.split(" (")[0] for u in failover.undone] == ["step 2 create_ticket"] and not failover.restored
    assert state.workspace.host == other.queue

    assert other.files() == {"a.txt": "v1\n", "b.txt": "v2\n"}, "cp-1's files plus the work redone after it"
    assert owner.files() == {"a.txt": "v1\n"}
    tickets, created = tracker(settings)
    assert tickets == [(2, "after cp-1")] and created == 2, "undone once, created again once"
    assert await activity_attempts(handle, "undo.create_ticket") == [1]
    assert [c.id for c in state.effects.checkpoints.items] == ["cp-1", "cp-2", "cp-3"]
    note = next(m.content for m in state.conversation.messages.items if m.role == "user" and "was lost" in (m.content or ""))
    assert "host-" in note and "cp-1" in note and "create_ticket" in note
    # the run's stream, on the workflow, outlives the host: it says what moved and goes on to the end
    events = [e async for e in handle.stream(topics=["steps", "answer"])]
    [moved] = [e for e in events if e.kind == "failover"]
    assert (moved.from_host, moved.to_host, moved.checkpoint_id) == (owner.queue, other.queue, "cp-1")
    assert [e.checkpoint_id for e in events if e.kind == "checkpoint"] == ["cp-1", "cp-2", "cp-3"]
    assert events[-1].kind == "end" and events[-1].answer == "done"


async def test_a_run_without_a_checkpoint_fails_over_from_its_initial_snapshot(client, settings, hosts):
    for host in hosts:  # what each host has under the workspace's name before the run
        (host.root / WORKSPACE).mkdir(parents=True)
        (host.root / WORKSPACE / "seed.txt").write_text(f"seed of {host.id}\n")
        (host.root / WORKSPACE / f"stale-{host.id}.txt").write_text("stale\n")
    script = [
        {"tool_calls": [write("a.txt", "one\n")]},
        ticket_and_wait("no checkpoint"),
        {"tool_calls": [write("b.txt", "two\n")]},  # on the killed host: fails over
        {"content": "done"},
    ]
    handle = await start(client, settings, scripted("hosts_plain", script, workspace=WORKSPACE))
    owner, other = await kill_owner_during_the_wait(handle, hosts)
    result = await asyncio.wait_for(handle.result(), 60)
    state = await handle.state()
    assert result.phase == Phase.DONE, result.last_error

    [failover] = state.workspace.failovers
    assert (failover.from_host, failover.to_host, failover.checkpoint_id) == (owner.queue, other.queue, None)
    assert "tool write_file" in failover.reason
    assert [r.split(" (")[0] for r in failover.restored] == ["step 3 write_file", "step 1 write_file"]
    assert [u.split(" (")[0] for u in failover.undone] == ["step 2 create_ticket"]

    assert other.files() == {
        "seed.txt": f"seed of {owner.id}\n", f"stale-{owner.id}.txt": "stale\n", "a.txt": "one\n", "b.txt": "two\n",
    }, "the owner's initial snapshot (the other host's own files gone), then the work redone"
    tickets, created = tracker(settings)
    assert tickets == [(2, "no checkpoint")] and created == 2
    assert await activity_attempts(handle, "undo.create_ticket") == [1]
    assert state.conversation.messages.items[0].role == "system" and state.conversation.messages.items[1].content == "do the task"
    assert state.step == 7  # 3 steps, the failover, 4 steps again: step numbers never go back


async def test_a_run_that_fails_after_its_host_is_lost_undoes_its_effects_on_another_host(client, settings, hosts):
    """The failure policy meets the dead host while undoing: the workspace is restored elsewhere to
    the initial snapshot (reverting the file), the ticket is deleted once, and the run ends FAILED."""
    script = [
        {"tool_calls": [write("a.txt", "one\n")]},
        ticket_and_wait("doomed"),
        {"tool_calls": [{"name": "probe_fatal", "arguments": {"note": "the task cannot be done"}}]},
        {"content": "never"},
    ]
    handle = await start(client, settings, scripted("hosts_plain", script, workspace=WORKSPACE))
    owner, other = await kill_owner_during_the_wait(handle, hosts)
    with pytest.raises(RunFailed):
        await asyncio.wait_for(handle.result(), 60)
    state = await handle.state()
    assert state.phase == Phase.FAILED, (state.phase, state.last_error)
    assert state.workspace.host == other.queue and "a.txt" not in other.files()
    [moved] = state.workspace.failovers  # recorded as any failover: what the restore reverted, what was undone
    assert (moved.from_host, moved.to_host, moved.checkpoint_id) == (owner.queue, other.queue, None)
    assert [r.split(" (")[0] for r in moved.restored] == ["step 1 write_file"]
    assert moved.undone == [], "the ticket (newer) was undone before the dead host was found"
    first, second = state.effects.rollbacks  # cut short by the lost host, then finished on the other
    assert [u.split(" (")[0] for u in first.undone] == ["step 2 create_ticket"] and first.errors == []
    assert [u.split(" (")[0] for u in second.undone] == ["step 1 write_file"]
    tickets, created = tracker(settings)
    assert tickets == [] and created == 1
    assert await activity_attempts(handle, "undo.create_ticket") == [1]


async def test_shadow_clean_removes_the_private_workspace_where_it_is_and_names_a_lost_host(client, settings, hosts):
    """A shadow's private copy is on whichever host restored it: that host is SIGKILLed, and the
    clean says it is gone (its copy stays) while the shared ledger's entries go; a second shadow,
    on the live host, has its copy removed there. The original's files stay."""
    script = [{"tool_calls": [write("a.txt", "one\n")]}, {"content": "done"}]
    original = await start(client, settings, scripted("hosts", script, workspace=WORKSPACE))
    assert (await asyncio.wait_for(original.result(), 30)).phase == Phase.DONE
    owner, _ = owner_and_other(await original.state(), hosts)
    shadows = runs(client, settings).shadows

    async def shadow():
        batch = await shadows.start([original.workflow_id], Candidate(model="recorded"))
        assert (await shadows.report(batch, wait_s=60)).runs[0].complete
        return batch, await shadows.get(batch.pairs[0].shadow).state()

    batch, state = await shadow()
    [dead] = [h for h in hosts if h.queue == state.workspace.host]
    [live] = [h for h in hosts if h is not dead]
    dead.worker.kill()
    [kept] = await shadows.clean(batch, host_timeout_s=2)
    assert kept.lost == [dead.id] and kept.removed_on == [] and kept.ledger_entries > 0
    assert (dead.root / state.plan.workspace / "a.txt").exists(), "a lost host's copy stays"

    batch, state = await shadow()  # the live host is the only one left
    [removed] = await shadows.clean(batch, host_timeout_s=2)
    assert removed.removed_on == [live.id] and removed.lost == [] and removed.ledger_entries > 0
    assert not (live.root / state.plan.workspace).exists()
    assert (owner.root / WORKSPACE / "a.txt").read_text() == "one\n"
