"""Agent runs with tools from real MCP servers (the official SDK's, tests/mcp_servers/): stdio
subprocesses and a streamable-HTTP server on loopback, one worker and one pool for the module (so
each server starts once), the model scripted, nothing else faked.

The tracker counts its side effects in SQLite, so "exactly once" is checked outside Temporal.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import uuid
from datetime import timedelta

import pytest

import tests.mcp_servers.profiles  # noqa: F401  (registers the mcp_* profiles)
from ratchet.client import RatchetClient, RunFailed
from ratchet.client.shadows import Candidate
from ratchet.contracts import ArtifactRef, Phase, ShadowOf
from ratchet.mcp.config import McpServer
from ratchet.mcp.pool import McpPool
from ratchet.ops.settings import Settings
from ratchet.payloads.converter import BASE_CONVERTER
from ratchet.plugin import RatchetOptions
from ratchet.replay.outcomes import OK
from ratchet.replay.replayer import Loaded, replay
from ratchet.worker.main import Activities, build_worker
from tests.conftest import REPLAY_EVERY_TASK
from tests.mcp_servers import HOSTILE, PYTHON, TRACKER, http_tracker, running
from tests.runs import activity_attempts, call, scripted, start, wait_for

TOKEN_VARIABLE = "RATCHET_TEST_MCP_TOKEN"
TOKEN = f"mcp-token-{uuid.uuid4().hex}"

@pytest.fixture(scope="module")
def mcp_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("mcp")
    (path / "markers").mkdir()
    (path / "list").write_text("v1")
    return path


@pytest.fixture(scope="module")
def http_tracker_url(mcp_dir):
    with http_tracker(mcp_dir / "tracker.db") as url:
        yield url


@pytest.fixture(scope="module")
def pool(mcp_dir, http_tracker_url) -> McpPool:
    tracker_env = {"TRACKER_DB": str(mcp_dir / "tracker.db")}
    return McpPool([
        McpServer(name="tracker", command=PYTHON, args=[str(TRACKER)], env=tracker_env),
        McpServer(name="tracker_http", url=f"{http_tracker_url}/mcp", headers={"Authorization": f"Bearer ${{{TOKEN_VARIABLE}}}"}),
        McpServer(name="wrong_url", url=f"{http_tracker_url}/not-mcp"),
        McpServer(name="hostile", command=PYTHON, args=[str(HOSTILE)], max_attempts=3,
                  env={"HOSTILE_MARKERS": str(mcp_dir / "markers"), "HOSTILE_LIST": str(mcp_dir / "list")}),
        McpServer(name="broken", command=str(mcp_dir / "no-such-server")),
    ])


@pytest.fixture(scope="module")
def mcp_settings(mcp_dir, dev_server, openai_server) -> Settings:
    return Settings(
        temporal_address=dev_server.address, task_queue=f"test-mcp-{uuid.uuid4().hex[:12]}",
        workspace_root=mcp_dir / "workspaces", artifact_dir=mcp_dir / "artifacts", ledger_path=mcp_dir / "ledger.sqlite3",
        max_cached_workflows=0 if REPLAY_EVERY_TASK else 100,
    )


@pytest.fixture(scope="module")
async def mcp_worker(client, mcp_settings, pool):
    os.environ[TOKEN_VARIABLE] = TOKEN  # read by name when the HTTP server is connected; redacted everywhere
    try:
        activities = Activities(RatchetOptions.from_settings(mcp_settings, mcp=pool), client)
        async with build_worker(client, mcp_settings, activities, graceful_shutdown_timeout=timedelta(0)):
            yield activities
            await pool.list_tools("tracker")  # a stdio server runs whichever of this module's tests ran here (xdist)
            pids = [c.process.pid for c in pool._connections.values() if getattr(c, "process", None) is not None]
        assert pids and not pool._connections, "the pool is closed when the worker stops"
        assert not any(running(pid) for pid in pids), "and its stdio servers with it"
    finally:
        del os.environ[TOKEN_VARIABLE]


def effects(mcp_dir, tool: str, detail: str | None = None) -> list[tuple[str, str]]:
    """The tracker's recorded side effects of `tool` (none before its first call made the table)."""
    with sqlite3.connect(mcp_dir / "tracker.db") as conn:
        if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'effects'").fetchone():
            return []
        rows = conn.execute("SELECT detail, key FROM effects WHERE tool = ?", (tool,)).fetchall()
    return [r for r in rows if detail is None or r[0] == detail]


def issue_open(mcp_dir, title: str) -> bool:
    with sqlite3.connect(mcp_dir / "tracker.db") as conn:
        return bool(conn.execute("SELECT open FROM issues WHERE title = ?", (title,)).fetchone()[0])


async def test_compensable_mcp_tools_roll_back_to_a_checkpoint(client, mcp_settings, mcp_worker, mcp_dir):
    alpha, beta = f"alpha-{uuid.uuid4().hex[:6]}", f"beta-{uuid.uuid4().hex[:6]}"
    script = [
        {"tool_calls": [call("tracker__search_issues", query="nothing-matches"), call("tracker__create_issue", title=alpha)]},
        {"tool_calls": [call("tracker__create_issue", title=beta)]},
        {"tool_calls": [call("probe_wait", seconds=3)]},
        {"content": "finished"},
    ]
    handle = await start(client, mcp_settings, scripted("mcp_saga", script))
    state = await wait_for(handle, lambda s: len(s.effects.checkpoints.items) == 2)
    search, create = state.calls.tool_calls.items[0], state.calls.tool_calls.items[1]
    assert (search.tool, search.result.ok) == ("tracker__search_issues", True)
    assert create.result.ok and alpha in create.result.output
    assert [(e.tool, e.effect) for e in state.effects.stack.items] == [("tracker__create_issue", "compensable")] * 2
    plan = await handle.rollback_plan("cp-1")
    assert [(p.tool, p.action) for p in plan] == [("tracker__create_issue", "undo")]
    assert plan[0].description.startswith("close_issue(id=") and "MCP server tracker" in plan[0].description

    report = (await handle.rollback("cp-1", then="stop")).report
    assert [u.split()[2] for u in report.undone] == ["tracker__create_issue"]
    assert (await handle.result()).phase == Phase.ROLLED_BACK
    assert issue_open(mcp_dir, alpha) and not issue_open(mcp_dir, beta)
    assert effects(mcp_dir, "create_issue", alpha) == [(alpha, f"{handle.workflow_id}/1/call_1_1")], "the key travels in _meta"
    assert len(effects(mcp_dir, "create_issue", beta)) == 1
    assert len([e for e in effects(mcp_dir, "close_issue") if e[1] == f"{handle.workflow_id}/2/call_2_0/undo"]) == 1
    history = await handle.history()
    kinds = {e.activity_task_scheduled_event_attributes.activity_type.name for e in history.events
             if e.HasField("activity_task_scheduled_event_attributes")}
    assert {"mcp.tracker", "undo.tracker__create_issue"} <= kinds
    [outcome] = await replay([Loaded("mcp", history)], BASE_CONVERTER)
    assert outcome.result == OK, outcome.detail


async def test_irreversible_tool_waits_for_approval_over_http_and_secrets_stay_out(client, mcp_settings, mcp_worker, mcp_dir):
    to = f"ops-{uuid.uuid4().hex[:6]}@example.com"
    script = [{"tool_calls": [call("tracker_http__whoami"), call("tracker_http__send_email", to=to, body="hello")]},
              {"content": "sent"}]
    handle = await start(client, mcp_settings, scripted("mcp_http", script))
    state = await wait_for(handle, lambda s: s.calls.pending_approvals)
    assert [p.tool for p in state.calls.pending_approvals] == ["tracker_http__send_email"] and not effects(mcp_dir, "send_email", to)
    await handle.approve(state.calls.pending_approvals[0].call_id)
    assert (await handle.result()).phase == Phase.DONE
    assert effects(mcp_dir, "send_email", to) == [(to, f"{handle.workflow_id}/1/call_1_1")]
    whoami = (await handle.state()).calls.tool_calls.items[0].result
    assert whoami.ok and "[REDACTED]" in whoami.output and TOKEN not in whoami.output
    history = str(await handle.history())
    assert TOKEN not in history and TOKEN_VARIABLE not in history


async def test_results_images_errors_invalid_20_mb_and_a_minimal_environment(client, mcp_settings, mcp_worker):
    script = [{"tool_calls": [call("hostile__picture"), call("hostile__fail"), call("hostile__bad_schema"), call("hostile__big"),
                              call("hostile__environment")]},
              {"content": "seen"}]
    handle = await start(client, mcp_settings, scripted("mcp_hostile", script))
    assert (await handle.result()).phase == Phase.DONE
    picture, fail, bad, big, environment = (r.result for r in (await handle.state()).calls.tool_calls.items)
    assert "HOSTILE_LIST" in environment.output and TOKEN_VARIABLE not in environment.output, "a minimal environment"
    digest = picture.output.split("artifact sha256:")[1].rstrip("]")
    assert picture.ok and "a red pixel" in picture.output
    assert mcp_worker.options.artifacts.get(ArtifactRef(digest=digest)).startswith(b"\x89PNG")
    assert (fail.ok, fail.error_type) == (False, "ToolError") and "the widget is on fire" in fail.output
    assert (bad.ok, bad.error_type) == (False, "ToolError") and "does not match the tool's output schema" in bad.output
    assert big.ok and big.output_ref is not None and len(big.output) < 4096
    assert mcp_worker.options.artifacts.get(big.output_ref) == b"x" * (20 * 1024 * 1024)
    assert sum(e.ByteSize() for e in (await handle.history()).events) < 200_000, "history holds a preview"


async def test_a_crash_mid_call_restarts_the_server_and_repeats_only_idempotent_calls(client, mcp_settings, mcp_worker, pool):
    starts = pool.starts.get("hostile", 0)
    handle = await start(client, mcp_settings, scripted("mcp_hostile", [{"tool_calls": [call("hostile__crash_once")]}, {"content": "ok"}]))
    assert (await handle.result()).phase == Phase.DONE
    assert (await handle.state()).calls.tool_calls.items[0].result.output == "survived"
    assert await activity_attempts(handle, "mcp.hostile") == [2], "the second attempt answered"
    assert pool.starts["hostile"] >= starts + 1

    strict = await start(client, mcp_settings, scripted("mcp_strict", [{"tool_calls": [call("hostile__crash_once")]}, {"content": "ok"}]))
    state = await wait_for(strict, lambda s: s.calls.pending_decisions or s.phase.terminal)
    assert [d.tool for d in state.calls.pending_decisions] == ["hostile__crash_once"], state.last_error
    assert "outcome is" in state.calls.pending_decisions[0].error and "unknown" in state.calls.pending_decisions[0].error
    assert await activity_attempts(strict, "mcp.hostile") == [2], "the second attempt refused: never a blind retry"
    await strict.terminate("test over")


async def test_a_running_run_keeps_its_pinned_tool_list_and_a_server_may_list_500(client, mcp_settings, mcp_worker, mcp_dir):
    first = await start(client, mcp_settings, scripted("mcp_hostile", [{"tool_calls": [call("hostile__old_tool")]}, {"content": "a"}]))
    state = await wait_for(first, lambda s: s.calls.pending_approvals)
    (mcp_dir / "list").write_text("v2")  # the server's tools change between the two runs
    second = await start(client, mcp_settings, scripted("mcp_hostile", [{"tool_calls": [call("hostile__new_tool")]}, {"content": "b"}]))
    assert (await second.result()).phase == Phase.DONE
    await first.approve(state.calls.pending_approvals[0].call_id)
    assert (await first.result()).phase == Phase.DONE
    first_state, second_state = await first.state(), await second.state()
    assert first_state.calls.tool_calls.items[0].result.output == "old_tool ran"
    names = [{t.name for t in s.plan.tools} for s in (first_state, second_state)]
    assert "hostile__old_tool" in names[0] and "hostile__new_tool" not in names[0]
    assert "hostile__new_tool" in names[1] and "hostile__old_tool" not in names[1]
    assert first_state.plan.mcp_ref != second_state.plan.mcp_ref

    (mcp_dir / "list").write_text("v2many")  # now 500 more
    third = await start(client, mcp_settings, scripted("mcp_many", [{"tool_calls": [call("hostile__extra_499")]}, {"content": "c"}]))
    assert (await third.result()).phase == Phase.DONE
    third_state = await third.state()
    assert len([t for t in third_state.plan.tools if t.mcp == "hostile"]) == 9 + 500  # v2's tools and 500 more
    assert third_state.calls.tool_calls.items[0].result.output == "extra_499 ran"


@pytest.mark.parametrize("profile, says", [
    ("mcp_broken", "MCP server 'broken': cannot start"),
    ("mcp_wrong_url", "MCP server 'wrong_url' at http://127.0.0.1"),
])
async def test_a_wrong_configuration_fails_the_run_naming_the_server(client, mcp_settings, mcp_worker, profile, says):
    handle = await start(client, mcp_settings, scripted(profile, [{"content": "never"}]))
    with pytest.raises(RunFailed) as failure:
        await handle.result()
    assert says in str(failure.value.reason)


async def test_a_shadow_runs_read_only_mcp_tools_and_never_the_others(client, mcp_settings, mcp_worker, mcp_dir):
    """ratchet/contracts/shadow.py: the read-only search runs for real; the original's create_issue gets its
    recorded result, another one is not executed; the MCP server's database is byte for byte as it was."""
    alpha, other = f"alpha-{uuid.uuid4().hex[:6]}", f"other-{uuid.uuid4().hex[:6]}"
    script = [{"tool_calls": [call("tracker__search_issues", query="x"), call("tracker__create_issue", title=alpha)]},
              {"content": "finished"}]
    original = await start(client, mcp_settings, scripted("mcp_saga", script))
    assert (await original.result()).phase == Phase.DONE
    before = hashlib.sha256((mcp_dir / "tracker.db").read_bytes()).hexdigest()
    state = await original.state()
    shadows = RatchetClient(client, mcp_settings).shadows
    [same] = (await shadows.report(await shadows.start([original.workflow_id], Candidate(model="recorded")), 60)).runs
    assert same.same and [(c.tool, c.shadow) for c in same.quarantined] == [("tracker__create_issue", "recorded")]
    another = [{"tool_calls": [call("tracker__search_issues", query="x"), call("tracker__create_issue", title=other)]},
               {"content": "finished"}]
    run = state.run.model_copy(update={"model": state.run.model.model_copy(update={"options": {"script": another}}),
                                       "shadow": ShadowOf(workflow_id=original.workflow_id)})
    handle = await RatchetClient(client, mcp_settings).start(run, f"{original.workflow_id}.other")
    assert (await handle.result()).phase == Phase.DONE
    calls = (await handle.state()).calls.tool_calls.items
    assert [(c.tool, c.shadow, c.result.ok) for c in calls] == [
        ("tracker__search_issues", None, True), ("tracker__create_issue", "quarantined", False)]
    assert hashlib.sha256((mcp_dir / "tracker.db").read_bytes()).hexdigest() == before
    assert not [e for e in effects(mcp_dir, "create_issue") if ".shadow-" in e[1] or ".other" in e[1]]
