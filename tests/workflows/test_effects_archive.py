"""A long run's older effects leave the handover for the artifact store, and come back for a
rollback that needs them (workflows/effects_archive.py)."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from ratchet.activities.archive import Archive, load_archived
from ratchet.contracts import ArchiveEffects, Effect, Phase
from ratchet.stores.artifacts import DirectoryArtifactStore
from ratchet.worker.main import build_worker
from tests.runs import ratchet, scripted, start, wait_for

pytestmark = pytest.mark.e2e  # slow: `make test-e2e`, not `make test`

STEPS, CALLS = 10, 20  # 200 compensable writes, a checkpoint after each step


@pytest.fixture
async def worker(client, settings):
    """With its workflow cache: a chain of ten runs replayed on every task (conftest's default) is
    what is slow here, and a state query that replays a run on a loaded machine can meet the SDK's
    2 s deadlock detector; replay is what tests/workflows/test_replay.py and the other tests check."""
    cached = settings.model_copy(update={"max_cached_workflows": 100})
    async with build_worker(client, cached, graceful_shutdown_timeout=timedelta(0)) as running:
        yield running


def script() -> list[dict]:
    steps = [{"tool_calls": [{"name": "write_file", "arguments": {"path": f"s{s}/f{c}.txt", "content": f"step {s} " * 20}}
                             for c in range(CALLS)]} for s in range(STEPS)]
    return steps + [{"tool_calls": [{"name": "wait", "arguments": {"seconds": 3600}}]}, {"content": "never"}]


async def handover_sizes(client, workflow_id: str) -> list[int]:
    """Bytes of each continuation's input, oldest first: read from each run of the chain's first
    event, with the raw Temporal client (what is measured is what Temporal stores)."""
    sizes = []
    async for run in client.list_workflows(f'WorkflowId="{workflow_id}"'):
        handle = client.get_workflow_handle(workflow_id, run_id=run.run_id)
        async for event in handle.fetch_history_events():
            payloads = event.workflow_execution_started_event_attributes.input.payloads
            if "continuation" in json.loads(payloads[0].data):
                sizes.append((run.start_time, len(payloads[0].data)))
            break
    return [size for _, size in sorted(sizes)]


async def test_the_handover_stays_flat_over_200_writes_and_a_rollback_brings_archived_effects_back(
    client, settings, worker,
):
    handle = await start(client, settings, scripted("archivist", script(), workspace="archive"))
    state = await wait_for(handle, lambda s: s.calls.pending_approvals or (s.step == STEPS + 1 and len(s.effects.checkpoints.items) == STEPS),
                           timeout=180)
    assert len(state.effects.checkpoints.items) == STEPS and state.continued >= 3, (state.step, state.continued)
    assert state.effects.stack.base == STEPS * CALLS and state.effects.stack.items == [], (state.effects.stack.base, len(state.effects.stack.items))

    # a handover every step: once the last KEEP_TOOL_CALLS call records fill up (3 steps), a step's
    # 20 writes add nothing; what still grows is the checkpoint record (under 1 KB a step)
    sizes = await handover_sizes(client, handle.workflow_id)
    assert len(sizes) == STEPS, sizes
    per_step = (sizes[-1] - sizes[3]) / (len(sizes) - 4)
    assert per_step < 1024, f"the handover grew {per_step:.0f} B a step: {sizes}"

    # cp-9 lies below the last handover's base (cp-10): its effects and messages come back from the
    # artifact store; the dry run lists the archived effects, the real rollback undoes them
    code, out = await ratchet(settings, "rollback", handle.workflow_id, f"cp-{STEPS - 1}", "--dry-run",
                              extra_env={"RATCHET_ARTIFACT_DIR": str(settings.artifact_dir)})
    assert code == 0 and out.count("  undo ") == CALLS and "write_file" in out and "archived" not in out, out
    report = (await handle.rollback(f"cp-{STEPS - 1}", then="stop")).report
    assert report.clean and len(report.undone) == CALLS, report
    root = settings.workspace_root / "archive"
    assert sorted(p.parent.name for p in root.rglob("f0.txt")) == [f"s{s}" for s in range(STEPS - 1)]
    after = await handle.state()
    assert after.effects.stack.base == 0 and after.effects.archive is None and len(after.effects.stack.items) == (STEPS - 1) * CALLS
    assert after.conversation.count == after.effects.checkpoints.items[-1].messages_len, "the conversation is back at cp-9"
    # a fork from a checkpoint older than the handover kept reads its messages from the transcript
    source_cp2 = after.effects.checkpoints.items[1]
    fork = await start(client, settings, {
        "agent": "archivist", "objective": "go on from cp-2",
        "model": {"provider": "scripted", "options": {"script": [{"content": "forked"}]}},
        "resume_from": {"workflow_id": handle.workflow_id, "checkpoint_id": "cp-2"},
    })
    assert (await fork.result()).phase == Phase.DONE
    forked = await fork.state()
    assert forked.conversation.messages.base == source_cp2.unsent and forked.conversation.count == source_cp2.messages_len + 2
    assert sorted(p.parent.name for p in (settings.workspace_root / forked.plan.workspace).rglob("f0.txt")) == ["s0", "s1"]


async def test_a_chain_of_archive_segments_loads_oldest_first(tmp_path):
    store = DirectoryArtifactStore(tmp_path)
    archive = Archive(store)

    def effect(i: int) -> Effect:
        return Effect(tool="write_file", step=i, call_id=f"c{i}", key=f"w/{i}/c{i}", arguments={}, effect="compensable")

    first = await archive.archive(ArchiveEffects(effects=[effect(1), effect(2)]))
    again = await archive.archive(ArchiveEffects(effects=[effect(1), effect(2)]))
    second = await archive.archive(ArchiveEffects(effects=[effect(3)], prev=first))
    assert first == again, "a retried archive writes the same segment"
    assert [e.step for e in load_archived(store, second)] == [1, 2, 3]
    assert load_archived(store, None) == []


async def test_a_closed_runs_rollback_brings_its_archived_effects_back(client, settings, worker):
    """A run that handed over every step ends DONE with all its effects in the archive; the
    rollback of the closed run (RollbackWorkflow, `rollback.load`) reads them back and undoes
    those after the checkpoint."""
    steps = [{"tool_calls": [{"name": "write_file", "arguments": {"path": f"s{s}/f{c}.txt", "content": f"step {s}\n"}}
                             for c in range(2)]} for s in range(4)]
    handle = await start(client, settings, scripted("archivist", steps + [{"content": "done"}], workspace="closed-archive"))
    assert (await handle.result()).phase == Phase.DONE
    state = await handle.state()
    assert state.continued >= 1 and state.effects.stack.base >= 4, (state.continued, state.effects.stack.base)  # step 2's archived

    code, out = await ratchet(settings, "rollback", handle.workflow_id, "cp-1")  # the worker reads the archive
    assert code == 0 and out.count("  undo ") == 6, out
    root = settings.workspace_root / "closed-archive"
    assert sorted(str(p.relative_to(root)) for p in root.rglob("*.txt")) == ["s0/f0.txt", "s0/f1.txt"]
