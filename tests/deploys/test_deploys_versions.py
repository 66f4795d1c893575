"""Two versions of Ratchet's code side by side (issue #39 item 5): one dev server, one Worker
Deployment, two `python -m ratchet.worker` processes, each running its own code. `v1` is the commit
`devtools.versions.V1` laid out from git (`git archive`: any clone with its history has it), `v2`
the working tree, whose workers also load tests/plugins/deploys_v2.py (a changed prompt: v2 is a
new build even where the working tree's code still equals v1's). Each worker's build id is the
default digest of the code it imports; `Checkout.identify` proves which code that is.

A one-shot run started on v1 finishes on v1 after v2 becomes current; a session started on v1
answers its next turn on v2 with its conversation, checkpoints and memory; both workers SIGKILLed
and started again during the switch change none of it. A broken v2 (tests/plugins/deploys_broken.py
fails a tool) at a 50% ramp fails its runs that use the tool; `deploy rollback --rerun` ends the ramp
and reruns v2's open runs on v1, DONE there with every effect once, through SIGKILLs of both."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from datetime import datetime
from pathlib import Path

import pytest

from devtools.chaos.stack import rows
from devtools.versions import (
    V1,
    V1_GUARD,
    V2_BROKEN,
    V2_BROKEN_PLUGIN,
    V2_PLUGIN,
    V2_PROMPT,
    WORKING_TREE,
    Checkout,
    checkout,
)
from devtools.workers import WorkerProcess
from ratchet.activities.tracker_tools import TrackerSettings
from ratchet.client import Refused, RunFailed
from ratchet.contracts import GuardPhase, Phase, TurnStatus
from ratchet.deploys import deployments
from ratchet.ops.settings import Settings
from ratchet.stores.memory import MemoryStore
from tests.ops_workers import PLUGINS, worker_env
from tests.plugins.probe import PROBE_LOG
from tests.runs import call, runs, scripted, start, until, wait_for

SESSION = [
    {"tool_calls": [call("remember", key="colour", value="blue"), call("probe_append", label="turn one")]},
    {"content": "noted your colour"},
    {"tool_calls": [call("recall", query="col")]},
    {"content": "your colour is blue"},
    {"content": "answer three"},
]


@pytest.fixture(scope="module")
def v1(tmp_path_factory: pytest.TempPathFactory) -> Checkout:
    return checkout(V1, tmp_path_factory.mktemp("v1") / "code")


def environments(settings: Settings, deployment: str) -> tuple[dict[str, str], dict[str, str]]:
    """The two workers' environments: one deployment, default build ids; v1 becomes current as
    the first build, v2 waits for a deploy and loads the v2 plugin."""
    on = lambda promote: settings.model_copy(  # noqa: E731
        update={"deployment": deployment, "build_id": None, "promote": promote}
    )
    return worker_env(on("first")), worker_env(on("never"), RATCHET_PLUGINS=f"{PLUGINS},{V2_PLUGIN}")


async def routed(client, deployment: str, build_id: str, current: bool = False) -> bool:
    await asyncio.sleep(0.2)  # the server limits requests per deployment
    found = await deployments.describe(client, deployment)
    if found is None:
        return False
    return found.current == build_id if current else found.version(build_id) is not None


async def serving(client, deployment: str, build_id: str, task_queue: str) -> bool:
    """The build's workers poll `task_queue` (a build known by one queue may not poll the others yet:
    `set_current` refuses it)."""
    return await routed(client, deployment, build_id) and task_queue in await deployments.task_queues(
        client, deployment, build_id
    )


async def test_v1_runs_finish_on_v1_and_sessions_move_to_v2_through_sigkills(client, settings, v1, tmp_path: Path):
    deployment = f"dep-{uuid.uuid4().hex[:10]}"
    env1, env2 = environments(settings, deployment)
    one, two = await asyncio.gather(
        asyncio.to_thread(v1.identify, env1), asyncio.to_thread(WORKING_TREE.identify, env2)
    )
    assert one.under(v1.root) and two.under(WORKING_TREE.root), (one.files, two.files)
    b1, b2 = one.build_id, two.build_id
    assert b1 != b2

    def worker(version: Checkout, env: dict[str, str], name: str) -> WorkerProcess:
        return version.worker(env, log=tmp_path / f"{name}.log", name=name)

    workers = [await worker(v1, env1, "v1-1").start()]
    try:
        await until(lambda: routed(client, deployment, b1, current=True), "v1 current (its first build)")
        ticket = [{"tool_calls": [call("create_ticket", title="prod: deploy day")]}, {"content": "ticket filed"}]
        one_shot = await start(client, settings, scripted("approver", ticket))
        scope, workspace = f"user-{uuid.uuid4().hex[:8]}", f"sess-{uuid.uuid4().hex[:8]}"
        chat = scripted("chatter", SESSION, objective="my colour is blue", workspace=workspace, memory_scope=scope)
        session = await start(client, settings, chat)
        await wait_for(one_shot, lambda s: s.phase == Phase.AWAITING_APPROVAL)
        state = await wait_for(session, lambda s: s.phase == Phase.AWAITING_MESSAGE)
        assert state.release.builds == [b1] and (await one_shot.state()).release.builds == [b1]
        prompt = (await session.transcript(0, 1)).messages[0].content
        first_run = (await session.describe()).run_id

        workers.append(await worker(WORKING_TREE, env2, "v2-1").start())
        await until(lambda: serving(client, deployment, b2, settings.task_queue), "v2 polling the task queue")
        assert await deployments.set_current(client, deployment, b2) == b1
        workers[1].kill()  # v2 dies as it becomes current: the session moves onto a build no worker runs
        asking = asyncio.create_task(session.ask("what is my colour?"))
        await until(lambda: _moved(session, first_run), "the session continued as new onto v2")
        workers[0].kill()  # and v1 dies with its one-shot run waiting for approval
        workers += [await worker(WORKING_TREE, env2, "v2-2").start(), await worker(v1, env1, "v1-2").start()]

        second = await asyncio.wait_for(asking, 60)
        assert (second.turn, second.status, second.answer) == (2, TurnStatus.ANSWERED, "your colour is blue")
        state = await session.state()
        assert state.release.builds == [b1, b2] and state.release.moves == 1
        assert [t.question for t in state.session.turns.items] == ["my colour is blue", "what is my colour?"]
        assert [c.id for c in state.effects.checkpoints.items] == ["turn-1", "turn-2"]
        [recalled] = [r for r in state.calls.tool_calls.items if r.tool == "recall"]
        assert recalled.result is not None and recalled.result.output == "colour: blue"  # memory, read by v2
        assert MemoryStore.sqlite(settings.ledger_path).recall(scope, "") == [("colour", "blue")]
        page = await session.transcript(0, 100)
        assert page.messages[0].content == prompt and V2_PROMPT not in prompt  # v1's conversation, carried
        assert [m.content for m in page.messages if m.role == "assistant" and m.content] == [
            "noted your colour",
            "your colour is blue",
        ]
        third = await session.ask("and now?")
        assert third.answer == "answer three" and (await session.state()).release.builds == [b1, b2]

        [pending] = (await one_shot.state()).calls.pending_approvals
        await one_shot.approve(pending.call_id)
        result = await one_shot.result()
        assert result.phase == Phase.DONE and result.builds == [b1]  # finished where it started, v1 killed or not

        fresh = await start(client, settings, scripted("chatter", [{"content": "hi"}], objective="hello"))
        await wait_for(fresh, lambda s: s.phase == Phase.AWAITING_MESSAGE)
        assert (await fresh.state()).release.builds == [b2]
        assert (await fresh.transcript(0, 1)).messages[0].content.endswith(V2_PROMPT)  # v2's own profile
        for run in (session, fresh):
            await run.close()

        log = (settings.workspace_root / workspace / PROBE_LOG).read_text().splitlines()
        assert len([line for line in log if line.startswith("done")]) == 1, log  # every effect once, kills or not
        tickets = [title for _, title, _ in rows(TrackerSettings(), "tickets")]
        assert tickets == ["prod: deploy day"], tickets
    finally:
        for process in workers:
            await process.terminate()


async def _moved(session, first_run: str) -> bool:
    return (await session.describe()).run_id != first_run


async def test_a_broken_v2_ramped_to_half_is_rolled_back_and_its_runs_rerun_on_v1(client, settings, v1, tmp_path):
    """v2 breaks `probe_echo`: at a 50% ramp its runs that use it fail, v1's do not. `deploy rollback
    --rerun` ends the ramp and rolls each open run of v2 back to its start (its effect undone on v2)
    and reruns it on v1: DONE there, every effect once; v2's worker SIGKILLed during the rollback and
    v1's during the reruns."""
    deployment = f"dep-{uuid.uuid4().hex[:10]}"
    env1, env2 = environments(settings, deployment)
    env2["RATCHET_PLUGINS"] += f",{V2_BROKEN_PLUGIN}"
    on = settings.model_copy(update={"deployment": deployment})
    deploys = runs(client, on).deploys

    def worker(version: Checkout, env: dict[str, str], name: str) -> WorkerProcess:
        return version.worker(env, log=tmp_path / f"{name}.log", name=name)

    workers = [await worker(v1, env1, "v1-1").start(), await worker(WORKING_TREE, env2, "v2-1").start()]
    try:
        b1 = await until(lambda: _current(client, deployment), "v1 current (its first build)")
        b2 = await until(lambda: _serving_other(client, deployment, b1, settings.task_queue), "v2 polling")
        await deploys.ramp(b2, 50)

        quick: dict[str, list[str]] = {b1: [], b2: []}  # runs that echo: FAILED on v2, DONE on v1
        while not (quick[b1] and quick[b2]):
            run = await start(client, settings, scripted("probe", [{"tool_calls": [call("probe_echo", text="hi")]}]))
            try:
                result = await run.result()
                quick[result.builds[0]].append(str(result.phase))
            except RunFailed as failed:
                quick[(await run.closed_state()).release.builds[0]].append(str(failed))
            assert len(quick[b1]) + len(quick[b2]) < 30, "the 50% ramp sent no run to one build"
        assert set(quick[b1]) == {str(Phase.DONE)} and all(V2_BROKEN in why for why in quick[b2]), quick

        waiting = await _waiting_on_both(client, settings, b1, b2)
        await until(lambda: _open_on(deploys, b2, len(waiting[b2])), "v2's open runs listed")

        rolling = asyncio.create_task(deploys.rollback(rerun=True))
        workers[1].kill()  # v2 dies as its runs are rolled back: their undos wait for its next worker
        workers.append(await worker(WORKING_TREE, env2, "v2-2").start())
        rolled = await asyncio.wait_for(rolling, 120)
        assert (rolled.bad, rolled.current, rolled.ended_ramp) == (b2, b1, True)
        assert sorted(r.workflow_id for r in rolled.reruns) == sorted(r.workflow_id for r in waiting[b2])
        assert all(r.rerun and r.undone == 1 for r in rolled.reruns), rolled.reruns
        for run in waiting[b2]:
            await wait_for(run, lambda s: s.release.builds == [b2, b1] and s.phase == Phase.AWAITING_APPROVAL)
        workers[0].kill()  # and v1 dies with the reruns waiting on it
        workers.append(await worker(v1, env1, "v1-2").start())

        await _approve_and_audit(settings, waiting, b1, b2)
    finally:
        for process in workers:
            await process.terminate()


async def _waiting_on_both(client, settings: Settings, b1: str, b2: str) -> dict[str, list]:
    """Runs with an effect (`probe_append`) waiting for a person's approval, started until at least
    two are on `b2` and one on `b1`: by build."""
    waiting: dict[str, list] = {b1: [], b2: []}
    while len(waiting[b2]) < 2 or not waiting[b1]:
        wid = f"rr-{uuid.uuid4().hex[:8]}"
        script = [
            {"tool_calls": [call("probe_append", label="one")]},
            {"tool_calls": [call("create_ticket", title=f"prod: {wid}")]},
            {"content": f"done {wid}"},
        ]
        run = await start(client, settings, scripted("approver", script, workspace=wid), wid)
        state = await wait_for(run, lambda s: s.phase == Phase.AWAITING_APPROVAL)
        waiting[state.release.builds[0]].append(run)
        assert len(waiting[b1]) + len(waiting[b2]) < 30, "the ramp sent no run to one build"
    return waiting


async def _approve_and_audit(settings: Settings, waiting: dict[str, list], b1: str, b2: str) -> None:
    """Approve every waiting run: DONE, on v1 (v2's after their rerun there), each effect once."""
    for run in waiting[b2]:
        await wait_for(run, lambda s: s.release.builds == [b2, b1] and s.phase == Phase.AWAITING_APPROVAL)
    for build, expected in ((b1, [b1]), (b2, [b2, b1])):
        for run in waiting[build]:
            [pending] = (await run.state()).calls.pending_approvals
            await run.approve(pending.call_id)
            result = await run.result()
            assert result.phase == Phase.DONE and result.builds == expected, (run.workflow_id, result)
            log = (settings.workspace_root / run.workflow_id / PROBE_LOG).read_text().splitlines()
            done = [line.split()[1] for line in log if line.startswith("done")]
            undone = [line.split()[1] for line in log if line.startswith("undone")]
            assert len(done) == len(set(done)) and len(done) - len(undone) == 1, log  # each effect once
            assert len(undone) == (1 if build == b2 else 0), log
    tickets = Counter(title for _, title, _ in rows(TrackerSettings(), "tickets"))
    assert set(tickets.values()) == {1} and len(tickets) == len(waiting[b1]) + len(waiting[b2]), tickets


async def _current(client, deployment: str) -> str | None:
    await asyncio.sleep(0.2)  # the server limits requests per deployment
    found = await deployments.describe(client, deployment)
    return found.current if found is not None else None


async def _serving_other(client, deployment: str, build: str, task_queue: str) -> str | None:
    await asyncio.sleep(0.2)
    found = await deployments.describe(client, deployment)
    other = next((b for b in found.build_ids if b != build), None) if found is not None else None
    if other is not None and task_queue in await deployments.task_queues(client, deployment, other):
        return other
    return None


async def _open_on(deploys, build: str, expected: int) -> bool:
    status = await deploys.status()
    return any(v.build_id == build and v.open_runs == expected for v in status.versions)


@pytest.fixture(scope="module")
def v1_guard(tmp_path_factory: pytest.TempPathFactory) -> Checkout:
    return checkout(V1_GUARD, tmp_path_factory.mktemp("v1-guard") / "code")


@pytest.mark.e2e
async def test_a_broken_v2_is_rolled_back_by_its_guard_and_rerun_on_v1(client, settings, v1_guard, tmp_path):
    """The same broken v2, ramped to 50% under a guard (`failure_rate<=0.2`, evaluated every second):
    its first failed run breaks the criterion, the guard (a workflow on v1's worker, SIGKILLed and
    restarted during the ramp) ends the ramp within its window; `rollback(rerun=True)` then changes
    no routing and reruns v2's open runs on v1, DONE there with every effect once."""
    v1 = v1_guard
    deployment = f"dep-{uuid.uuid4().hex[:10]}"
    env1, env2 = environments(settings, deployment)
    env2["RATCHET_PLUGINS"] += f",{V2_BROKEN_PLUGIN}"
    deploys = runs(client, settings.model_copy(update={"deployment": deployment})).deploys

    def worker(version: Checkout, env: dict[str, str], name: str) -> WorkerProcess:
        return version.worker(env, log=tmp_path / f"{name}.log", name=name)

    workers = [await worker(v1, env1, "v1-1").start(), await worker(WORKING_TREE, env2, "v2-1").start()]
    try:
        b1 = await until(lambda: _current(client, deployment), "v1 current (its first build)")
        b2 = await until(lambda: _serving_other(client, deployment, b1, settings.task_queue), "v2 polling")
        window = 120.0  # a SIGKILL during an evaluation delays the guard by that activity's timeout (60 s)
        ramped = await deploys.ramp(b2, 50, guard="failure_rate<=0.2", window_s=window, interval_s=1, min_runs=3)
        assert ramped.guard is not None and ramped.ramping == b2
        waiting = await _waiting_on_both(client, settings, b1, b2)
        workers[0].kill()  # v1's worker runs the guard: it goes on in the next one
        workers.append(await worker(v1, env1, "v1-2").start())

        failed_at = None
        while failed_at is None:  # runs that echo until one lands on v2 and fails there
            run = await start(client, settings, scripted("probe", [{"tool_calls": [call("probe_echo", text="hi")]}]))
            try:
                await run.result()
            except RunFailed as failed:
                assert V2_BROKEN in str(failed)
                failed_at = (await run.describe()).close_time
        status = await until(lambda: _guard_ended(deploys), "the guard ended", timeout=window)
        guard = status.guard
        assert guard.phase == GuardPhase.ROLLED_BACK and "failure_rate" in (guard.reason or ""), guard
        decided = datetime.fromisoformat(guard.history[-1].at)
        assert guard.history[-1].action == "rollback" and (decided - failed_at).total_seconds() < window
        assert (status.current, status.ramping) == (b1, None)
        await until(lambda: _open_on(deploys, b2, len(waiting[b2])), "v2's open runs listed")
        with pytest.raises(Refused, match=f"rolled build '{b2}' back already"):  # not v1 back to a build before it
            await deploys.rollback()
        assert ((await deploys.status()).current, (await deploys.status()).ramping) == (b1, None)

        rolling = asyncio.create_task(deploys.rollback(rerun=True))
        workers[1].kill()  # v2 dies as its runs are rolled back
        workers.append(await worker(WORKING_TREE, env2, "v2-2").start())
        rolled = await asyncio.wait_for(rolling, 120)
        assert (rolled.bad, rolled.current, rolled.ended_ramp) == (b2, b1, False)
        assert sorted(r.workflow_id for r in rolled.reruns) == sorted(r.workflow_id for r in waiting[b2])
        assert all(r.rerun and r.undone == 1 for r in rolled.reruns), rolled.reruns
        await _approve_and_audit(settings, waiting, b1, b2)
    finally:
        for process in workers:
            await process.terminate()


async def _guard_ended(deploys):
    status = await deploys.status()
    return status if status.guard is not None and status.guard.ended else None
