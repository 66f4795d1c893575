"""Two versions of Ratchet's code side by side (issue #39 item 5): one dev server, one Worker
Deployment, two `python -m ratchet.worker` processes, each running its own code. `v1` is the commit
`devtools.versions.V1` laid out from git (`git archive`: any clone with its history has it), `v2`
the working tree, whose workers also load tests/plugins/deploys_v2.py (a changed prompt: v2 is a
new build even where the working tree's code still equals v1's). Each worker's build id is the
default digest of the code it imports; `Checkout.identify` proves which code that is.

A one-shot run started on v1 finishes on v1 after v2 becomes current; a session started on v1
answers its next turn on v2 with its conversation, checkpoints and memory; both workers SIGKILLed
and started again during the switch change none of it."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from devtools.chaos.stack import rows
from devtools.versions import V1, V2_PLUGIN, V2_PROMPT, WORKING_TREE, Checkout, checkout
from devtools.workers import WorkerProcess
from ratchet.activities.tracker_tools import TrackerSettings
from ratchet.contracts import Phase, TurnStatus
from ratchet.deploys import deployments
from ratchet.ops.settings import Settings
from ratchet.stores.memory import MemoryStore
from tests.ops_workers import PLUGINS, worker_env
from tests.plugins.probe import PROBE_LOG
from tests.runs import call, scripted, start, until, wait_for

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
