"""Chaos in CI: a few agent runs while the worker process is SIGKILLed and the dev server restarts,
half of them on a model endpoint that fails 30% of the time, then the audit of the outside store
(`make chaos` is the same with 50 runs). Also: the audit itself catches what it claims to catch."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType

import tests.plugins.chaos_tools  # noqa: F401  (the chaos profile and outbox tool, in this process too)
from devtools.chaos.audit import audit_world
from devtools.chaos.runner import Options, problems, run_chaos
from devtools.chaos.stack import Stack
from ratchet.activities.tracker_tools import connect as connect_tracker
from ratchet.contracts import (
    STATE_VERSION,
    AgentRun,
    AgentState,
    Effect,
    EffectClass,
    EffectStatus,
    Phase,
    ToolCallRecord,
    ToolResult,
)
from tests.plugins.chaos_tools import connect_outbox
from tests.runs import start

pytestmark = pytest.mark.e2e  # slow: `make test-e2e`, not `make test`

async def test_chaos_runs_survive_sigkills_a_server_restart_and_model_faults(tmp_path: Path):
    # No checkpoints here (chaos_quick): a worker killed during a verification delays its run by the
    # verify timeout + 60 s; test_saga_sweep.py covers rollback to checkpoints.
    opts = Options(
        runs=5, seed=7, model_share=0.4, fault_rate=0.3, spread_s=3.0, kill_every=(2.0, 5.0), max_kills=2,
        task_timeout_s=5.0, deadline_s=110.0, base=tmp_path, agent="chaos_quick", first_faults=("429", "truncated"),
    )
    session = await run_chaos(opts, log=lambda line: None)
    figures = session.figures
    assert figures.ok, figures.line() + "\n" + "\n".join(problems(session))
    assert figures.kills >= 1 and figures.server_restarts == 1  # a second kill unless every run closed first
    assert figures.compensations >= 1 and figures.model_faults > 0 and figures.model_retries > 0
    assert figures.line().startswith(
        f"runs=5 completed=5 lost=0 duplicate_effects=0 missing_effects=0 "
        f"compensations_ok={figures.compensations}/{figures.compensations}"
    )


def _effect(tool: str, key: str, **arguments) -> Effect:
    return Effect(tool=tool, step=1, call_id=key.rsplit("/", 1)[-1], key=key, arguments=arguments,
                  effect=EffectClass.COMPENSABLE, status=EffectStatus.DONE)


def test_the_audit_catches_duplicates_leftovers_missing_effects_and_residue(tmp_path: Path):
    stack = Stack(tmp_path, "127.0.0.1:1")
    state = AgentState(v=STATE_VERSION, workflow_id="w", run=AgentRun(agent="chaos", objective="x"))
    state.effects.stack.reset([
        _effect("write_file", "w/1/a", path="a.txt", content="A"),
        _effect("create_ticket", "w/1/t", title="t"),
        _effect("outbox_send", "w/1/m", to="ops"),
    ])
    ws = stack.workspace("w")
    ws.mkdir(parents=True)
    (ws / "a.txt").write_text("A")
    with connect_tracker(stack.tracker_path) as conn:
        conn.execute("INSERT INTO tickets (idempotency_key, title, body) VALUES ('w/1/t', 't', '')")
    with connect_outbox(stack.tracker_path) as conn:
        conn.execute("INSERT INTO outbox (idempotency_key, recipient, body) VALUES ('w/1/m', 'ops', '')")
    clean = audit_world(stack, "w", "w", state)
    assert (clean.missing, clean.extra, clean.residue) == ([], [], [])

    with connect_outbox(stack.tracker_path) as conn:  # the same call acted twice
        conn.execute("INSERT INTO outbox (idempotency_key, recipient, body) VALUES ('w/1/m', 'ops', '')")
    with connect_tracker(stack.tracker_path) as conn:  # an effect the history says was undone
        conn.execute("INSERT INTO tickets (idempotency_key, title, body) VALUES ('w/2/undone', 'u', '')")
    (ws / "b.txt").write_text("left over")
    (ws / ".a.txt.ratchet-tmp").write_text("half written")
    (ws / "a.txt").write_text("changed")
    ok = ToolResult(ok=True, output="created")  # a completed call the run no longer accounts for
    state.calls.tool_calls.items.append(ToolCallRecord(step=3, call_id="lost", tool="create_ticket", key="w/3/lost",
                                           arguments="{}", result=ok))
    dirty = audit_world(stack, "w", "w", state)
    assert sorted(dirty.extra) == ["file b.txt", "outbox w/1/m x2", "tickets w/2/undone x1"]
    assert dirty.residue == [".a.txt.ratchet-tmp"]
    assert dirty.missing == ["file a.txt", "record w/3/lost: done, then neither on the stack nor undone"]


async def test_a_retrying_model_call_shows_why_it_retried(client, settings, worker, openai_server):
    key = os.environ["OPENAI_API_KEY"]
    openai_server.set_script([{"content": "recovered"}], key=key)
    openai_server.enqueue_faults([{"truncated": True}], key=key)
    run = {"agent": "chaos", "objective": "one model call", "model": {"provider": "openai", "timeout_s": 5}}
    handle = await start(client, settings, run)
    assert (await handle.result()).phase == Phase.DONE
    assert (await handle.state()).answer == "recovered"
    started = [
        e.activity_task_started_event_attributes for e in (await handle.history()).events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
    ]
    retried = [attrs.last_failure.message for attrs in started if attrs.attempt > 1]
    assert retried and "model endpoint" in retried[0], retried
