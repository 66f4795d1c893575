"""The deploy verbs (issue #39, item 3) on `ratchet.client` (`RatchetClient.deploys`) and the CLI,
against two builds of one Worker Deployment on the dev server (this code under two build ids, as
in tests/deploys/test_deploys.py): status, ramp, promote, rollback (with --rerun), check, and bad input."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import dataclasses
import json
import uuid
from datetime import timedelta

import httpx2 as httpx
import pytest
from temporalio import workflow
from temporalio.common import RawValue

from ratchet.client import InvalidInput, RatchetClient, Refused
from ratchet.console.app import build_app
from ratchet.contracts import AgentResult, Phase
from ratchet.deploys import deployments
from ratchet.ops.http_guard import HttpGuard
from ratchet.plugin import RatchetOptions
from ratchet.replay.candidate import LocalCandidate
from ratchet.worker.main import build_worker
from ratchet.workflows.agent import AgentWorkflow
from tests.plugins.probe import PROBE_LOG
from tests.runs import call, ratchet, scripted, start, until, wait_for


@pytest.fixture
def names() -> tuple[str, str, str]:
    """A deployment and two build ids of this test's own (visibility counts runs by build id)."""
    tag = uuid.uuid4().hex[:8]
    return f"dep-{tag}", f"good-{tag}", f"bad-{tag}"


def build(settings, deployment: str, build_id: str, promote: str = "never"):
    return settings.model_copy(update={"deployment": deployment, "build_id": build_id, "promote": promote})


@contextlib.asynccontextmanager
async def console(client, settings):
    app = build_app(RatchetClient(client, settings), HttpGuard.for_server("127.0.0.1", same_origin=True))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
        yield http


def worker(client, settings):
    return build_worker(client, settings, graceful_shutdown_timeout=timedelta(0))


async def routed(client, deployment: str, current: str, ramping: str | None = None) -> deployments.Deployment:
    async def check():
        await asyncio.sleep(0.2)  # the server limits requests per deployment
        found = await deployments.describe(client, deployment)
        return found if found is not None and found.current == current and found.ramping == ramping else None

    return await until(check, f"{deployment}: {current} current, {ramping} ramping")


async def registered(client, deployment: str, build_id: str, task_queue: str) -> None:
    """Until `build_id` serves `task_queue` (a build is known before each of its queues is: routing
    to it is refused until it serves the current build's)."""

    async def check():
        await asyncio.sleep(0.2)
        found = await deployments.describe(client, deployment)
        return found is not None and found.version(build_id) is not None and (
            task_queue in await deployments.task_queues(client, deployment, build_id)
        )

    await until(check, f"{build_id} serves {task_queue} in {deployment}")


TICKET = [{"tool_calls": [call("create_ticket", title="prod: deploy day")]}, {"content": "ticket filed"}]


async def test_status_ramp_promote_and_rollback(client, settings, names):
    deployment, good, bad = names
    v1, v2 = build(settings, deployment, good, promote="first"), build(settings, deployment, bad)
    deploys = RatchetClient(client, v1).deploys
    async with worker(client, v1), worker(client, v2):
        await routed(client, deployment, good)
        await registered(client, deployment, bad, settings.task_queue)
        pinned = await start(client, v1, scripted("approver", TICKET))
        await wait_for(pinned, lambda s: s.phase == Phase.AWAITING_APPROVAL)

        status = await until(
            lambda: _status_where(deploys, lambda s: _version(s, good).open_runs == 1), "the pinned run counted"
        )
        assert (status.current, status.ramping, status.previous) == (good, None, None)
        assert {v.build_id for v in status.versions} == {good, bad}
        assert _version(status, good).current and _version(status, bad).open_runs == 0

        ramped = await deploys.ramp(bad, 25)
        assert (ramped.current, ramped.ramping, ramped.ramp_percentage) == (good, bad, 25)
        status = await deploys.status()
        assert (status.ramping, status.ramp_percentage) == (bad, 25) and _version(status, bad).ramping
        async with console(client, v1) as http:  # the console's deploys page and a run's builds
            shown = (await http.get("/deploys")).text
            assert f"<b>{bad}</b> ramping at 25% of new runs" in shown
            assert f"<td><code>{good}</code></td><td>current</td><td>CURRENT</td><td>1</td>" in shown
            assert f"<td><code>{bad}</code></td><td>ramping 25%</td>" in shown
            assert "No guard has run for this deployment" in shown
            shown = (await http.get(f"/runs/{pinned.workflow_id}")).text
            assert f"<th>builds</th><td id=state-builds>{good}</td>" in shown

        promoted = await deploys.promote(bad)
        assert (promoted.current, promoted.previous) == (bad, good)
        status = await deploys.status()
        assert (status.current, status.ramping, status.previous) == (bad, None, good)

        back = await deploys.rollback()  # the previous current build again; its pinned run untouched
        assert (back.current, back.bad, back.ended_ramp, back.reruns) == (good, bad, False, [])
        await routed(client, deployment, good)

        await deploys.ramp(bad, 10)
        ended = await deploys.rollback()  # during a ramp: the ramp ends, the current build stays
        assert (ended.current, ended.bad, ended.ended_ramp) == (good, bad, True)
        await routed(client, deployment, good, None)

        [pending] = (await pinned.state()).calls.pending_approvals
        await pinned.approve(pending.call_id)
        assert (await pinned.result()).builds == [good]
        status = await until(
            lambda: _status_where(deploys, lambda s: _version(s, good).outcomes == {"DONE": 1}),
            "the finished run counted by its phase",
        )
        assert _version(status, good).open_runs == 0


async def test_bad_input_is_refused_and_changes_nothing(client, settings, names, monkeypatch):
    deployment, good, gone = names
    v1, v2 = build(settings, deployment, good, promote="first"), build(settings, deployment, gone)
    deploys = RatchetClient(client, v1).deploys
    async with worker(client, v1):
        await routed(client, deployment, good)
        async with worker(client, v2):
            await registered(client, deployment, gone, settings.task_queue)
        # a build whose workers stopped: no poll of it within POLLED_WITHIN (2 minutes; 2 s here)
        monkeypatch.setattr(deployments, "POLLED_WITHIN", timedelta(seconds=2))
        await until(lambda: _not(deployments.polled(client, deployment, gone)), f"{gone}'s polls aged")
        with pytest.raises(Refused, match=f"no worker of build '{gone}' polls deployment '{deployment}' now"):
            await deploys.ramp(gone, 10)
        with pytest.raises(Refused, match=f"no worker of build '{gone}' polls"):
            await deploys.promote(gone)
        with pytest.raises(InvalidInput, match="percentage: 140 is outside 0-100"):
            await deploys.ramp(good, 140)
        with pytest.raises(InvalidInput, match="percentage: -1 is outside 0-100"):
            await deploys.ramp("v9", -1)
        with pytest.raises(InvalidInput, match=f"build: 'v9' is unknown to '{deployment}' \\(builds: {good}, {gone}\\)"):
            await deploys.ramp("v9", 10)
        with pytest.raises(InvalidInput, match="build: 'v9' is unknown"):
            await deploys.promote("v9")
        with pytest.raises(Refused, match="is current in .* already"):
            await deploys.ramp(good, 10)
        with pytest.raises(Refused, match=f"deployment '{deployment}' has no earlier version to go back to"):
            await deploys.rollback()
        found = await deployments.describe(client, deployment)
        assert found is not None and (found.current, found.ramping) == (good, None)
        elsewhere = RatchetClient(client, build(settings, f"none-{uuid.uuid4().hex[:6]}", good)).deploys
        with pytest.raises(Refused, match="no worker deployment 'none-"):
            await elsewhere.status()


async def test_rollback_rerun_moves_an_open_run_to_the_good_build(client, settings, names):
    """`rollback(rerun=True)`: the bad build's open run is rolled back to its start (no checkpoint)
    and reruns on the restored build to DONE; the probe log shows each effect done once, and the
    two of the bad build undone once."""
    deployment, good, bad = names
    v1, v2 = build(settings, deployment, good, promote="first"), build(settings, deployment, bad)
    deploys = RatchetClient(client, v1).deploys
    workspace = f"rr-{uuid.uuid4().hex[:6]}"
    script = [
        {"tool_calls": [call("probe_append", label="one")]},
        {"tool_calls": [call("probe_append", label="two")]},
        {"tool_calls": [call("create_ticket", title="prod: after the rerun")]},
        {"content": "done on the good build"},
    ]
    async with worker(client, v1), worker(client, v2):
        await routed(client, deployment, good)
        await registered(client, deployment, bad, settings.task_queue)
        await deploys.promote(bad)
        run = await start(client, v2, scripted("approver", script, workspace=workspace))
        state = await wait_for(run, lambda s: s.phase == Phase.AWAITING_APPROVAL)
        assert state.release.builds == [bad]
        await until(lambda: _status_where(deploys, lambda s: _version(s, bad).open_runs == 1), "the run on bad")

        back = await deploys.rollback(rerun=True)
        assert (back.current, back.bad) == (good, bad)
        [rerun] = back.reruns
        assert (rerun.workflow_id, rerun.checkpoint_id, rerun.rerun, rerun.undone) == (run.workflow_id, "start", True, 2)

        state = await wait_for(run, lambda s: s.release.builds == [bad, good] and s.phase == Phase.AWAITING_APPROVAL)
        [pending] = state.calls.pending_approvals
        await run.approve(pending.call_id)
        result = await run.result()
        assert (result.phase, result.builds, result.answer) == (Phase.DONE, [bad, good], "done on the good build")

    lines = (settings.workspace_root / workspace / PROBE_LOG).read_text().splitlines()
    done = [line.split()[1:] for line in lines if line.startswith("done ")]
    undone = [[key.removesuffix("/undo"), label] for key, label in (line.split()[1:] for line in lines if line.startswith("undone "))]
    keys = [key for key, _ in done]
    assert len(keys) == len(set(keys)) == 4, lines  # each call acted once: two on bad, two again on good
    assert [label for _, label in done] == ["one", "two", "one", "two"]
    assert sorted(undone) == sorted(done[:2]), lines  # the bad build's two undone, once each


async def test_check_refuses_another_build_and_a_session_it_cannot_read(client, settings, names):
    deployment, good, candidate_build = names
    v1 = build(settings, deployment, good, promote="first")
    deploys = RatchetClient(client, v1).deploys
    async with worker(client, v1):
        await routed(client, deployment, good)
        chat = [{"tool_calls": [call("probe_append", label="turn one")]}, {"content": "answer one"}]
        session = await start(client, v1, scripted("chatter", chat, objective="first question"))
        await wait_for(session, lambda s: s.phase == Phase.AWAITING_MESSAGE)
        listed = RatchetClient(client, v1)
        await until(
            lambda: listed.list(session=True, running=True, query=f'WorkflowId="{session.workflow_id}"'),
            "the session listed",
        )
        options = RatchetOptions.from_settings(v1)

        here = LocalCandidate(options, "not-" + candidate_build, [])
        with pytest.raises(Refused, match=f"the code here is build 'not-{candidate_build}', not '{candidate_build}'"):
            await deploys.check(candidate_build, here)

        same = await deploys.check(candidate_build, LocalCandidate(options, candidate_build, []))
        assert same.ok and same.runs == [session.workflow_id], same.problems

        tools = copy.copy(options.tools)
        tools.tools = {name: t for name, t in options.tools.tools.items() if name != "probe_append"}
        fewer = LocalCandidate(dataclasses.replace(options, tools=tools), candidate_build, [])
        refused = await deploys.check(candidate_build, fewer)
        assert not refused.ok
        [problem] = refused.problems
        assert (problem.workflow_id, problem.source) == (session.workflow_id, "state")
        assert "after turn 1" in problem.where
        assert f"its plan names tool 'probe_append', which build {candidate_build} does not have" in problem.what
        replaced = LocalCandidate(options, candidate_build, [], workflows=[AuditedAgentWorkflow])
        diverged = await deploys.check(candidate_build, replaced)
        [problem] = diverged.problems
        assert (problem.workflow_id, problem.source) == (session.workflow_id, "run")
        assert problem.where == "before step 1, run.prepare" and problem.what.startswith("NONDETERMINISTIC: ")

        env = {**_env(deployment, candidate_build), "RATCHET_PLUGINS": "tests.plugins.probe"}  # the workers' tools
        status, out = await ratchet(v1, "deploy", "check", candidate_build, extra_env=env)
        assert status == 0 and f"build {candidate_build} can take over: 1 open run(s) that would move" in out, out
        status, out = await ratchet(v1, "deploy", "check", candidate_build, extra_env=_env(deployment, candidate_build))
        assert status == 1 and "its plan names tool 'probe_append', which build" in out, out  # no plugin: no probe tools
        status, out = await ratchet(v1, "deploy", "check", "other", extra_env=_env(deployment, candidate_build))
        assert status == 1 and f"the code here is build '{candidate_build}', not 'other'" in out, out
        await session.close()


def _env(deployment: str, build_id: str | None = None) -> dict[str, str]:
    return {"RATCHET_DEPLOYMENT": deployment, **({"RATCHET_BUILD_ID": build_id} if build_id else {})}


# Unsandboxed: the sandbox would re-import this test module; replay compares commands without it.
@workflow.defn(name="AgentWorkflow", sandboxed=False)
class AuditedAgentWorkflow(AgentWorkflow):
    """Today's workflow plus an activity before anything else: a candidate that needs a patch."""

    @workflow.run
    async def run(self, raw: RawValue = None) -> AgentResult:  # type: ignore[assignment]
        await workflow.execute_activity("audit.record", "start", start_to_close_timeout=timedelta(seconds=5))
        return await super().run(raw)


async def test_cli_status_bad_percentage(client, settings, names):
    deployment, good, _ = names
    v1 = build(settings, deployment, good, promote="first")
    env = {"RATCHET_DEPLOYMENT": deployment}
    async with worker(client, v1):
        await routed(client, deployment, good)
        status, out = await ratchet(v1, "deploy", "status", extra_env=env)
        assert status == 0, out
        assert good in out and "current" in out
        status, out = await ratchet(v1, "deploy", "status", "--json", extra_env=env)
        assert status == 0 and json.loads(out)["current"] == good, out
        status, out = await ratchet(v1, "deploy", "ramp", good, "140", extra_env=env)
        assert status == 2 and "percentage: 140 is outside 0-100" in out, out
        status, out = await ratchet(v1, "deploy", "promote", "v9", extra_env=env)
        assert status == 2 and "'v9' is unknown" in out, out
        status, out = await ratchet(v1, "deploy", "rollback", extra_env=env)
        assert status == 1 and "no earlier version" in out, out


async def _status_where(deploys, predicate):
    await asyncio.sleep(0.2)
    status = await deploys.status()
    return status if predicate(status) else None


async def _not(check) -> bool:
    await asyncio.sleep(0.2)
    return not await check


def _version(status, build_id: str):
    return next(v for v in status.versions if v.build_id == build_id)


async def test_a_guarded_ramp_is_shown_and_ended_by_hand_and_a_flag_from_the_cli(client, settings, names):
    deployment, good, bad = names
    v1, v2 = build(settings, deployment, good, promote="first"), build(settings, deployment, bad)
    deploys = RatchetClient(client, v1).deploys
    env = _env(deployment)
    async with worker(client, v1), worker(client, v2):
        await routed(client, deployment, good)
        await registered(client, deployment, bad, settings.task_queue)
        with pytest.raises(InvalidInput, match="guard: unknown guard term 'latency'"):
            await deploys.ramp(bad, 10, guard="failure_rate<=0.05, latency<=3")
        status, out = await ratchet(v1, "deploy", "ramp", bad, "10", "--guard", "failure_rate<=", extra_env=env)
        assert status == 2 and "does not parse" in out, out
        assert (await deploys.status()).guard is None  # nothing started

        routed_ = await deploys.ramp(bad, 10, guard="failure_rate<=0.5", window_s=600, steps=[50, 100], interval_s=0.5)
        assert routed_.guard is not None and routed_.ramping == bad
        status_ = await until(lambda: _status_where(deploys, lambda s: s.ramping == bad), "the guard's first step")
        assert status_.guard is not None and status_.guard.phase == "RAMPING" and status_.guard.request.steps == [10, 50, 100]
        with pytest.raises(Refused, match="a guard ramps"):
            await deploys.ramp(bad, 20)
        status, out = await ratchet(v1, "deploy", "status", extra_env=env)
        assert status == 0 and f"guard: RAMPING {bad} at 10% (step 1 of 3" in out, out

        run = await start(client, v1, scripted("probe", [{"content": "a wrong answer"}]))
        await run.result()
        status, out = await ratchet(v1, "flag", run.workflow_id, "wrong answer", extra_env=env)
        assert status == 0 and f"{run.workflow_id} flagged" in out, out
        status, out = await ratchet(v1, "flag", "no-such-run-x", "wrong answer", extra_env=env)
        assert status == 2 and "no-such-run-x: run not found" in out, out
        status, out = await ratchet(v1, "flag", run.workflow_id, " ", extra_env=env)
        assert status == 2 and "reason" in out, out

        promoted = await deploys.promote(bad)  # by hand: the guard stops
        assert promoted.guard_stopped and promoted.current == bad
        guard = (await deploys.status()).guard
        assert guard is not None and guard.phase == "STOPPED"
