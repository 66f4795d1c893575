"""Worker versioning (issue #39): two builds of one Worker Deployment on one dev server, side by side.
A one-shot run finishes on the build it started on after another becomes current; a session's
next turn runs on the new build, its conversation, turns and checkpoints carried; a new run
starts on the current build; a run records the builds it ran on (state, result, RatchetBuildId).
Here both builds are this code under two build ids (tests/deploys/test_deploys_versions.py runs two
versions of the code)."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from datetime import timedelta

import pytest

from ratchet.contracts import TO_START, Phase, RunAttributes, TurnStatus
from ratchet.deploys import deployments
from ratchet.deploys.build import build_parts, default_build_id
from ratchet.plugin import RatchetOptions
from ratchet.worker.main import build_worker
from tests.runs import call, runs, scripted, start, until, wait_for


def build(settings, deployment: str, build_id: str, promote: str = "never"):
    return settings.model_copy(update={"deployment": deployment, "build_id": build_id, "promote": promote})


@pytest.fixture
def deployment() -> str:
    return f"dep-{uuid.uuid4().hex[:10]}"


async def test_one_shot_runs_stay_pinned_and_sessions_move_at_their_next_turn(client, settings, deployment):
    v1, v2 = build(settings, deployment, "v1", promote="first"), build(settings, deployment, "v2")
    ticket = [{"tool_calls": [call("create_ticket", title="prod: deploy day")]}, {"content": "ticket filed"}]
    chat = [{"content": "answer one"}, {"content": "answer two"}, {"content": "answer three"}]
    async with build_worker(client, v1, graceful_shutdown_timeout=timedelta(0)):
        one_shot = await start(client, v1, scripted("approver", ticket))
        session = await start(client, v1, scripted("chatter", chat, objective="first question"))
        await wait_for(one_shot, lambda s: s.phase == Phase.AWAITING_APPROVAL)
        state = await wait_for(session, lambda s: s.phase == Phase.AWAITING_MESSAGE)
        assert state.release.builds == ["v1"]
        async with build_worker(client, v2, graceful_shutdown_timeout=timedelta(0)):
            await until(lambda: _knows(client, deployment, "v2", settings.task_queue), "build v2 registered")
            assert await deployments.set_current(client, deployment, "v2") == "v1"

            second = await session.ask("second question")  # reaches v1's run, answered by v2's
            assert (second.turn, second.status, second.answer, second.moved) == (
                2,
                TurnStatus.ANSWERED,
                "answer two",
                False,
            )
            state = await session.state()
            assert state.release.builds == ["v1", "v2"] and state.release.moves == 1 and state.continued == 1
            assert [t.question for t in state.session.turns.items] == ["first question", "second question"]
            assert [c.id for c in state.effects.checkpoints.items] == ["turn-1", "turn-2"]
            third = await session.ask("third question")  # no further move: it is on the target build
            assert third.answer == "answer three" and (await session.state()).release.moves == 1

            [pending] = (await one_shot.state()).calls.pending_approvals
            await one_shot.approve(pending.call_id)
            result = await one_shot.result()
            assert result.phase == Phase.DONE and result.builds == ["v1"]  # finished where it started

            fresh = await start(client, v2, scripted("probe", [{"content": "hi"}]))
            assert (await fresh.result()).builds == ["v2"]
            listed = await until(
                lambda: runs(client, v2).list(query=f'{RunAttributes.BUILD}="v2" AND WorkflowId="{fresh.workflow_id}"'),
                "the new run listed by RatchetBuildId",
            )
            assert [r.workflow_id for r in listed] == [fresh.workflow_id]
            await session.close()


async def test_a_session_that_opted_out_stays_on_its_build(client, settings, deployment):
    v1, v2 = build(settings, deployment, "v1", promote="first"), build(settings, deployment, "v2")
    chat = [{"content": "answer one"}, {"content": "answer two"}]
    async with build_worker(client, v1, graceful_shutdown_timeout=timedelta(0)):
        run = {**scripted("chatter", chat, objective="first question"), "session": {"upgrade": "never"}}
        session = await start(client, v1, run)
        await wait_for(session, lambda s: s.phase == Phase.AWAITING_MESSAGE)
        async with build_worker(client, v2, graceful_shutdown_timeout=timedelta(0)):
            await until(lambda: _knows(client, deployment, "v2", settings.task_queue), "build v2 registered")
            await deployments.set_current(client, deployment, "v2")
            assert (await session.ask("second question")).answer == "answer two"
            state = await session.state()
            assert state.release.builds == ["v1"] and state.release.moves == 0
            await session.close()


async def test_bad_deployment_requests_are_refused_and_change_nothing(client, settings, deployment):
    v1 = build(settings, deployment, "v1", promote="first")
    async with build_worker(client, v1, graceful_shutdown_timeout=timedelta(0)):
        await until(lambda: _current(client, deployment, "v1"), "v1 current")
        with pytest.raises(deployments.DeploymentError, match="build 'v9' is unknown to deployment"):
            await deployments.set_current(client, deployment, "v9")
        with pytest.raises(deployments.DeploymentError, match="outside 0-100"):
            await deployments.set_ramping(client, deployment, "v1", 140)
        with pytest.raises(deployments.DeploymentError, match="current in .* already"):
            await deployments.set_ramping(client, deployment, "v1", 10)
        with pytest.raises(deployments.DeploymentError, match="no worker deployment 'nope-x'"):
            await deployments.set_current(client, "nope-x", "v1")
        found = await deployments.describe(client, deployment)
        assert found is not None and found.current == "v1" and found.ramping is None


def test_the_default_build_id_changes_with_a_prompt_or_a_tool(settings):
    options = RatchetOptions.from_settings(settings)
    parts = build_parts(options.profiles, options.tools, options.mcp)
    assert parts == build_parts(options.profiles, options.tools, options.mcp)
    first = default_build_id(options.profiles, options.tools, options.mcp)
    coder = options.profiles.profiles["coder"]
    options.profiles.profiles["coder"] = coder.model_copy(update={"system_prompt": coder.system_prompt + " Be brief."})
    try:
        changed = default_build_id(options.profiles, options.tools, options.mcp)
    finally:
        options.profiles.profiles["coder"] = coder
    tool = options.tools.tools["read_file"]
    options.tools.tools["read_file"] = dataclasses.replace(tool, timeout_s=tool.timeout_s + 1)
    try:
        tool_changed = default_build_id(options.profiles, options.tools, options.mcp)
    finally:
        options.tools.tools["read_file"] = tool
    assert (
        len({first, changed, tool_changed}) == 3
        and first.startswith("0.")
        and first == default_build_id(options.profiles, options.tools, options.mcp)
    )


async def _knows(client, deployment: str, build_id: str, queue: str) -> bool:
    """`build_id` serves `queue` and a worker of it is seen polling (routing to a build that does not is
    refused: `deployments.set_current`, the client's verbs)."""
    await asyncio.sleep(0.2)  # the server limits requests per deployment
    found = await deployments.describe(client, deployment)
    if found is None or found.version(build_id) is None:
        return False
    serves = queue in await deployments.task_queues(client, deployment, build_id)
    return serves and await deployments.polled(client, deployment, build_id)


async def _current(client, deployment: str, build_id: str) -> bool:
    await asyncio.sleep(0.2)
    found = await deployments.describe(client, deployment)
    return found is not None and found.current == build_id


async def test_a_rollback_rerun_moves_a_pinned_run_to_the_current_build(client, settings, deployment):
    """`then=rerun`: a run pinned to a bad build is rolled back to its checkpoint (its effects undone
    there, by its own build) and reruns from it on the current build, each effect once."""
    good, bad = build(settings, deployment, "good", promote="first"), build(settings, deployment, "bad")
    script = [
        {"tool_calls": [call("probe_append", label="kept")]},
        {"tool_calls": [call("probe_append", label="undone")]},
        {"tool_calls": [call("create_ticket", title="prod: after the rerun")]},
        {"content": "done on the good build"},
    ]
    async with build_worker(client, good, graceful_shutdown_timeout=timedelta(0)):
        await until(lambda: _current(client, deployment, "good"), "good current")
        async with build_worker(client, bad, graceful_shutdown_timeout=timedelta(0)):
            await until(lambda: _knows(client, deployment, "bad", settings.task_queue), "bad registered")
            await deployments.set_current(client, deployment, "bad")
            run = await start(client, bad, scripted("approver", script, workspace=f"rr-{uuid.uuid4().hex[:6]}"))
            state = await wait_for(run, lambda s: s.phase == Phase.AWAITING_APPROVAL)
            assert state.release.builds == ["bad"]
            assert [e.tool for e in state.effects.stack.items] == ["probe_append", "probe_append"]
            await deployments.set_current(client, deployment, "good")  # the deploy's rollback
            outcome = await run.rollback(TO_START, then="rerun")  # no checkpoint (no verifier): its start
            assert outcome.report is not None and outcome.report.clean and len(outcome.report.undone) == 2
            state = await wait_for(
                run, lambda s: s.release.builds == ["bad", "good"] and s.phase == Phase.AWAITING_APPROVAL
            )
            assert state.release.moves == 1
            [pending] = state.calls.pending_approvals
            await run.approve(pending.call_id)
            result = await run.result()
            assert result.phase == Phase.DONE and result.builds == ["bad", "good"]
            assert result.answer == "done on the good build"


async def test_an_idle_session_moves_when_nudged_so_the_old_build_drains(client, settings, deployment):
    """`move` (what `ratchet deploy` sends idle sessions): it moves now, not at its next message;
    a one-shot run ignores it."""
    v1, v2 = build(settings, deployment, "v1", promote="first"), build(settings, deployment, "v2")
    async with build_worker(client, v1, graceful_shutdown_timeout=timedelta(0)):
        session = await start(client, v1, scripted("chatter", [{"content": "one"}, {"content": "two"}], objective="q1"))
        await wait_for(session, lambda s: s.phase == Phase.AWAITING_MESSAGE)
        async with build_worker(client, v2, graceful_shutdown_timeout=timedelta(0)):
            await until(lambda: _knows(client, deployment, "v2", settings.task_queue), "build v2 registered")
            await deployments.set_current(client, deployment, "v2")
            await session.move()
            state = await wait_for(session, lambda s: s.release.builds == ["v1", "v2"])
            assert state.phase == Phase.AWAITING_MESSAGE and state.session.turn_number == 1
            assert (await session.ask("q2")).answer == "two"
            await session.close()


async def test_a_fork_of_a_pinned_run_starts_on_the_current_build(client, settings, deployment):
    v1, v2 = build(settings, deployment, "v1", promote="first"), build(settings, deployment, "v2")
    chat = [{"content": "answer one"}, {"content": "forked answer"}]
    async with build_worker(client, v1, graceful_shutdown_timeout=timedelta(0)):
        session = await start(client, v1, scripted("chatter", chat, objective="first question"))
        await wait_for(session, lambda s: s.phase == Phase.AWAITING_MESSAGE)
        async with build_worker(client, v2, graceful_shutdown_timeout=timedelta(0)):
            await until(lambda: _knows(client, deployment, "v2", settings.task_queue), "build v2 registered")
            await deployments.set_current(client, deployment, "v2")
            fork = await session.fork("turn-1")
            state = await wait_for(fork, lambda s: s.phase == Phase.AWAITING_MESSAGE)
            assert state.release.builds == ["v2"]
            assert (await session.state()).release.builds == ["v1"]  # the original has had no turn since
            await fork.close()
            await session.close()


async def test_promote_tells_idle_sessions_to_move_so_the_old_build_drains(client, settings, deployment):
    v1, v2 = build(settings, deployment, "v1", promote="first"), build(settings, deployment, "v2")
    chat = [{"content": "one"}, {"content": "two"}]
    async with build_worker(client, v1, graceful_shutdown_timeout=timedelta(0)):
        session = await start(client, v1, scripted("chatter", chat, objective="q1"))
        await wait_for(session, lambda s: s.phase == Phase.AWAITING_MESSAGE)
        await until(  # visibility lists it as idle: what `move_idle_sessions` queries
            lambda: runs(client, v1).list(phase="AWAITING_MESSAGE", query=f'WorkflowId="{session.workflow_id}"'),
            "the session listed as idle",
        )
        async with build_worker(client, v2, graceful_shutdown_timeout=timedelta(0)):
            await until(lambda: _knows(client, deployment, "v2", settings.task_queue), "build v2 registered")
            deploys = runs(client, v1.model_copy(update={"deployment": deployment})).deploys
            routed = await deploys.promote("v2")
            assert routed.current == "v2" and routed.sessions_told == 1
            state = await wait_for(session, lambda s: s.release.builds == ["v1", "v2"])
            assert state.phase == Phase.AWAITING_MESSAGE
            await session.close()
