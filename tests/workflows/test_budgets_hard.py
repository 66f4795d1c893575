"""Budgets are hard: a model call that cannot fit is never made, the last one is capped, an
overshoot says by how much, and the deadline interrupts whatever the run is doing (on the
time-skipping server: hours in milliseconds)."""

from __future__ import annotations

import os
import sqlite3
import uuid
from datetime import timedelta

from ratchet.activities.tracker_tools import TrackerSettings
from ratchet.contracts import AgentResult, ErrorType, Phase
from ratchet.worker.main import build_worker
from tests.runs import scripted, start
from tests.workflows.test_background_time import env, ts_settings  # noqa: F401  (fixtures)

LONG = "Please read this carefully. " * 720  # about 20,000 characters: about 5,000 prompt tokens


def echo(text: str) -> dict:
    return {"tool_calls": [{"name": "probe_echo", "arguments": {"text": text}}]}


async def test_a_model_call_that_cannot_fit_the_token_budget_is_not_made(client, settings, worker):
    """The first call (about 5,000 prompt tokens) fits in 6,000; the second would need as many
    again: the run stops before it, inside the budget."""
    handle = await start(client, settings, scripted("probe", [echo("hi"), echo("again"), {"content": "done"}],
                                                    objective=LONG, budget={"max_tokens": 6000}))
    result: AgentResult = await handle.result()
    assert result.phase == Phase.BUDGET_EXHAUSTED
    assert result.used.model_calls == 1 and result.used.steps == 1
    assert result.used.prompt_tokens + result.used.completion_tokens <= 6000
    assert result.last_error.startswith("token budget exhausted: the next model call needs about "), result.last_error


async def test_a_model_call_that_cannot_fit_the_cost_budget_is_not_made(client, settings, worker):
    """$1 per 1k prompt tokens: the first call costs about $5 of $6, the second would cost $5 more."""
    handle = await start(client, settings, scripted("priced_echo", [echo("hi"), echo("again"), {"content": "done"}],
                                                    objective=LONG, budget={"max_cost_usd": 6.0}))
    result: AgentResult = await handle.result()
    assert result.phase == Phase.BUDGET_EXHAUSTED
    assert result.used.model_calls == 1 and 4.0 < result.used.cost_usd <= 6.0
    assert result.last_error.startswith("cost budget exhausted: the next model call would cost more than the $"), result.last_error


async def test_the_last_call_is_capped_and_an_overshoot_says_by_how_much(client, settings, worker, openai_server):
    """Near the end of the budget the request's max_tokens is what is left after the prompt; the
    test server ignores it (as a provider may), so the run ends saying how far it went over."""
    key = os.environ["OPENAI_API_KEY"]
    openai_server.set_script([echo("x" * 8000), {"content": "never"}], key=key)  # about 2,000 completion tokens
    handle = await start(client, settings, {"agent": "priced_echo", "objective": "x", "budget": {"max_tokens": 2000}})
    result: AgentResult = await handle.result()
    [request] = openai_server.chat_requests(key=key)
    prompt = result.used.prompt_tokens
    assert 0 < request.json["max_tokens"] <= 2000 - prompt
    total = prompt + result.used.completion_tokens
    assert result.phase == Phase.BUDGET_EXHAUSTED and total > 2000
    assert result.last_error == (
        f"token budget exceeded: {total} of 2000 tokens used, {total - 2000} over "
        "(the model used more than its last call was allowed)"
    )
    # a final answer that overshoots is still the answer, and the run says it went over
    openai_server.set_script([{"content": "y" * 8000}], key=key)
    handle = await start(client, settings, {"agent": "priced_echo", "objective": "x", "budget": {"max_tokens": 2000}})
    result = await handle.result()
    assert result.phase == Phase.DONE and result.last_error.startswith("token budget exceeded: "), result.last_error


# --- the deadline, on the time-skipping server --------------------------------------------------

async def run_for(env, settings, run: dict):  # noqa: F811
    """Run to its end: result, state, and how long it took in workflow time (from its history:
    the test server may skip on once the run has closed)."""
    async with build_worker(env.client, settings, graceful_shutdown_timeout=timedelta(0)):
        handle = await start(env.client, settings, run, f"ts-{uuid.uuid4().hex[:8]}")
        result = await handle.result()
        state = await handle.state()
        events = (await handle.history()).events
    return result, state, events[-1].event_time.ToDatetime() - events[0].event_time.ToDatetime()


def tickets(settings) -> list[str]:
    with sqlite3.connect(TrackerSettings().path) as conn:
        return [t for (t,) in conn.execute("SELECT title FROM tickets")]


async def test_the_deadline_interrupts_a_wait_and_the_failure_policy_undoes_the_run(env, ts_settings):  # noqa: F811
    script = [
        {"tool_calls": [{"name": "create_ticket", "arguments": {"title": "t1"}}]},
        {"tool_calls": [{"name": "wait", "arguments": {"seconds": 7 * 24 * 3600}}]},
        {"content": "a week later"},
    ]
    result, state, elapsed = await run_for(env, ts_settings, scripted("approver", script, budget={"max_duration_s": 3600}))
    assert result.phase == Phase.BUDGET_EXHAUSTED
    assert result.last_error == "time budget exhausted: 3600s of 3600s elapsed"
    assert timedelta(hours=1) <= elapsed < timedelta(hours=2)
    wait = state.calls.tool_calls.items[-1]
    assert wait.tool == "wait" and wait.result.error_type == ErrorType.INTERRUPTED
    # the step was cut short: rollback_to_last_checkpoint (no checkpoint: everything) undid the ticket
    assert [u.split()[2] for u in state.effects.rollbacks[-1].undone] == ["create_ticket"]
    assert tickets(ts_settings) == []


async def test_the_deadline_ends_an_approval_wait(env, ts_settings):  # noqa: F811
    script = [{"tool_calls": [{"name": "create_ticket", "arguments": {"title": "prod: restart db"}}]}, {"content": "never"}]
    result, state, elapsed = await run_for(env, ts_settings, scripted("approver", script, budget={"max_duration_s": 600}))
    assert result.phase == Phase.BUDGET_EXHAUSTED and "time budget exhausted" in result.last_error
    assert timedelta(minutes=10) <= elapsed < timedelta(minutes=11)  # the approval would have waited 3 days
    assert state.calls.pending_approvals == [] and state.calls.decisions == {}


async def test_the_deadline_cancels_a_running_tool_through_its_heartbeat(env, ts_settings):  # noqa: F811
    script = [{"tool_calls": [{"name": "long_count", "arguments": {"items": 600, "per_item_s": 0.1}}]}, {"content": "never"}]
    run = scripted("approver", script, workspace=f"lc-{uuid.uuid4().hex[:6]}", budget={"max_duration_s": 2})
    result, state, _ = await run_for(env, ts_settings, run)
    assert result.phase == Phase.BUDGET_EXHAUSTED and "time budget exhausted" in result.last_error
    assert state.calls.tool_calls.items[-1].result.error_type == ErrorType.INTERRUPTED
    log = (ts_settings.workspace_root / run["workspace"] / "probe.log").read_text().splitlines()
    assert len([line for line in log if line.startswith("item")]) < 200  # it stopped, it did not count on
