"""The billing ledger on the real path: the openai client against the strict local server, which
fails after streaming half a reply (with usage), answers 500 with a usage body, and 429 then
succeeds: what the run was billed equals what the server counted, to the token; a run whose retries
would cross `max_cost_usd` stops before the call that crosses it."""

from __future__ import annotations

import os
import uuid

import pytest

from ratchet.cli.costs import table
from ratchet.contracts import AgentResult, ModelChoice, Phase
from ratchet.core.profiles import AgentProfile, register_profile
from ratchet.stores.billing import BillingStore
from tests.runs import scripted, start
from tests.workflows.test_budgets_hard import LONG, echo


async def test_every_attempt_is_billed_as_the_server_counted_it(client, settings, worker, openai_server):
    key = os.environ["OPENAI_API_KEY"]
    openai_server.reset()
    openai_server.set_script([echo("hi"), {"content": "done"}], key=key)
    openai_server.enqueue_faults(
        [  # the cut first: its retry waits the policy's first interval (1 s), the others what they ask for
            {"cut_after": 3, "usage": True},
            {"status": 429, "retry_after_ms": 50},
            {"status": 500, "usage": True, "retry_after_ms": 50},
        ],
        key=key,
    )
    handle = await start(client, settings, {"agent": "priced_echo", "objective": "bill me"})
    result: AgentResult = await handle.result()
    assert result.phase == Phase.DONE, result.last_error
    counted = openai_server.counted[key]
    rows = BillingStore.sqlite(settings.ledger_path).rows(handle.workflow_id)
    assert [(r.step, r.attempt, r.cause, r.error) for r in rows] == [
        (1, 1, "answer", "ModelStreamCut"),
        (1, 2, "retry", "ModelHTTP429"),
        (1, 3, "retry", "ModelHTTP500"),
        (1, 4, "retry", ""),
        (2, 1, "answer", ""),
    ], rows
    assert sum(r.prompt_tokens for r in rows) == counted["prompt_tokens"] == result.used.prompt_tokens, [
        (r.prompt_tokens, r.completion_tokens) for r in rows
    ]
    assert sum(r.completion_tokens for r in rows) == counted["completion_tokens"] == result.used.completion_tokens
    assert not any(r.estimated for r in rows)
    billed = sum(r.prompt_tokens * 1.0 + r.completion_tokens * 2.0 for r in rows) / 1000  # priced_echo's prices
    assert abs(result.used.cost_usd - billed) < 1e-9 and abs(sum(r.cost_usd for r in rows) - billed) < 1e-9
    # seen through the client, as `ratchet cost` prints it
    report = await handle.cost()
    assert report.total.attempts == 5 and report.total.prompt_tokens == counted["prompt_tokens"]
    assert {cause: b.attempts for cause, b in report.by_cause.items()} == {"answer": 2, "retry": 3}
    assert [(line.step, line.cause, line.billed.attempts, line.failed) for line in report.lines] == [
        (1, "answer", 1, 1),
        (1, "retry", 3, 2),
        (2, "answer", 1, 0),
    ]
    printed = table(report).splitlines()
    assert printed[0].split()[:3] == ["step", "cause", "model"] and printed[-1].startswith("total")
    assert printed[-1].split()[-1] == f"{billed:.6f}"


async def test_a_retry_the_cost_budget_cannot_cover_is_not_made(client, settings, worker, openai_server):
    """$1 per 1k prompt tokens and about 5,000 prompt tokens a call: two attempts that fail with a
    usage body cost about $10 of $12; the third would cross it and is never sent."""
    key = os.environ["OPENAI_API_KEY"]
    openai_server.reset()
    openai_server.set_script([{"content": "never"}], key=key)
    openai_server.enqueue_faults([{"status": 500, "usage": True, "retry_after_ms": 50}] * 3, key=key)
    handle = await start(
        client, settings, {"agent": "priced_echo", "objective": LONG, "budget": {"max_cost_usd": 12.0}}
    )
    result: AgentResult = await handle.result()
    assert result.phase == Phase.BUDGET_EXHAUSTED, result.last_error
    assert len(openai_server.chat_requests(key=key)) == 2
    assert openai_server.pending_faults(key=key) == 1
    rows = BillingStore.sqlite(settings.ledger_path).rows(handle.workflow_id)
    assert len(rows) == 2 and abs(result.used.cost_usd - sum(r.cost_usd for r in rows)) < 1e-9
    assert 8.0 < result.used.cost_usd < 12.0
    assert "after 2 failed attempt(s) of this call billed $" in result.last_error, result.last_error


async def test_a_sub_agents_spending_rolls_up_to_its_parent(client, settings, worker, openai_server):
    """The parent (scripted, free) delegates to a priced child on the openai server: the child's
    attempts are in the parent's report as `sub-agent`, and in its budget."""
    key = os.environ["OPENAI_API_KEY"]
    openai_server.reset()
    openai_server.set_script([{"content": "child done"}], key=key)
    child = {"agent": "priced_echo", "objective": "say done", "model": {"provider": "openai"}}
    parent = scripted("boss", [{"tool_calls": [{"name": "delegate", "arguments": child}]}, {"content": "done"}])
    handle = await start(client, settings, parent)
    result: AgentResult = await handle.result()
    assert result.phase == Phase.DONE, result.last_error
    report = await handle.cost()
    counted = openai_server.counted[key]
    child_cost = (counted["prompt_tokens"] * 1.0 + counted["completion_tokens"] * 2.0) / 1000
    assert report.by_cause["sub-agent"].attempts == 1
    assert report.by_cause["sub-agent"].cost_usd == pytest.approx(child_cost)
    assert [line.step for line in report.lines if line.cause == "sub-agent"] == [1]  # the parent's step
    assert result.used.cost_usd == pytest.approx(report.total.cost_usd) == pytest.approx(child_cost)


async def test_a_model_without_a_price_runs_and_its_cost_is_marked_unknown(client, settings, worker, openai_server):
    key = os.environ["OPENAI_API_KEY"]
    openai_server.reset()
    openai_server.set_script([{"content": "done"}], key=key)
    run = {"agent": "probe", "objective": "x", "model": {"provider": "openai", "model": "house-model-7"}}
    handle = await start(client, settings, run)
    result: AgentResult = await handle.result()
    assert result.phase == Phase.DONE and result.used.cost_unknown and result.used.cost_usd == 0
    report = await handle.cost()
    assert report.unpriced == ["openai/house-model-7"] and report.total.unpriced
    assert "cost unknown: no price for openai/house-model-7" in table(report)


async def test_every_attempt_on_anthropic_is_billed_as_the_server_counted_it(
    client, settings, anthropic_server, anthropic_key
):
    """The same on the anthropic provider and the strict Anthropic server (prompt caching on: cache
    writes and reads billed apart): a stream cut after message_start and a piece of text, 429, a 500
    with usage, then the reply."""
    from ratchet.worker.main import build_worker

    anthropic_server.set_script([{"content": "a reply long enough to be cut off in the middle of it"}], key=anthropic_key)
    anthropic_server.enqueue_faults(
        [{"cut_after": 3}, {"status": 429, "retry_after": 0.05}, {"status": 500, "usage": True, "retry_after": 0.05}],
        key=anthropic_key,
    )
    async with build_worker(client, settings):
        handle = await start(client, settings, {"agent": "priced_echo", "objective": "bill me", "model": {"provider": "anthropic"}})
        result: AgentResult = await handle.result()
    assert result.phase == Phase.DONE, result.last_error
    counted = anthropic_server.counted(anthropic_key)
    rows = BillingStore.sqlite(settings.ledger_path).rows(handle.workflow_id)
    assert [(r.attempt, r.error) for r in rows] == [(1, "ModelStreamCut"), (2, "ModelHTTP429"), (3, "ModelHTTP500"), (4, "")]
    prompt = counted["input_tokens"] + counted.get("cache_read_input_tokens", 0) + counted.get("cache_creation_input_tokens", 0)
    assert sum(r.prompt_tokens for r in rows) == prompt == result.used.prompt_tokens
    assert sum(r.completion_tokens for r in rows) == counted["output_tokens"] == result.used.completion_tokens
    assert sum(r.cache_write_tokens for r in rows) == counted.get("cache_creation_input_tokens", 0) > 0
    assert sum(r.cache_read_tokens for r in rows) == counted.get("cache_read_input_tokens", 0)
    assert not any(r.estimated for r in rows)


register_profile(
    AgentProfile(
        name="priced-fallback",
        system_prompt="s",
        tools=[],
        provider="openai",
        fallbacks=[ModelChoice(provider="anthropic", usd_per_1k_prompt_tokens=1.0, usd_per_1k_completion_tokens=2.0)],
        fallback_after_attempts=2,
        usd_per_1k_prompt_tokens=1.0,
        usd_per_1k_completion_tokens=2.0,
    )
)


async def test_a_fallback_the_cost_budget_cannot_cover_is_not_made(
    client, settings, openai_server, openai_key, anthropic_server, anthropic_key
):
    """The primary's two attempts fail with a usage body (about $5 each of $12); the fallback's
    prompt alone would cost about $5 more: it is never sent, and the run says why."""
    from ratchet.worker.main import build_worker

    openai_server.enqueue_faults([{"status": 500, "usage": True, "retry_after_ms": 50}] * 2, key=openai_key)
    async with build_worker(client, settings):
        run = {"agent": "priced-fallback", "objective": LONG, "budget": {"max_cost_usd": 12.0}}
        handle = await start(client, settings, run)
        result: AgentResult = await handle.result()
    assert result.phase == Phase.BUDGET_EXHAUSTED, result.last_error
    assert anthropic_server.requests_of(anthropic_key) == []
    assert 8.0 < result.used.cost_usd < 12.0
    assert result.last_error.startswith("cost budget exhausted: the next model call would cost more than the $")


async def test_a_tenants_daily_cap_stops_the_call_that_would_cross_it_and_then_refuses_starts(
    client, settings, worker, openai_server, monkeypatch
):
    """$1 per 1k prompt tokens and about 5,000 prompt tokens a call, a cap of $7 a day for the
    tenant: the first call is billed about $5, the second would cross the cap and is never sent;
    once the tenant's day total reaches its cap, a start is refused before anything runs."""
    from ratchet.client.tenants import TenantCapReached

    tenant = f"capped-{uuid.uuid4().hex[:8]}"
    key = os.environ["OPENAI_API_KEY"]
    openai_server.reset()
    openai_server.set_script([echo("hi"), {"content": "never"}], key=key)
    monkeypatch.setattr(settings, "tenant_daily_usd", f"{tenant}:7")
    run = {"agent": "priced_echo", "objective": LONG, "tenant": tenant}
    handle = await start(client, settings, run)
    result: AgentResult = await handle.result()
    assert result.phase == Phase.BUDGET_EXHAUSTED, result.last_error
    assert f"tenant '{tenant}' reached its daily cost cap of $7" in (result.last_error or "")
    assert len(openai_server.chat_requests(key=key)) == 1, "the call that would cross the cap was not sent"
    store = BillingStore.sqlite(settings.ledger_path)
    [row] = store.rows(handle.workflow_id)
    assert row.tenant == tenant and 4 < row.cost_usd < 7
    assert abs(store.spent_since(tenant, 0) - row.cost_usd) < 1e-9

    monkeypatch.setattr(settings, "tenant_daily_usd", f"{tenant}:{row.cost_usd}")
    with pytest.raises(TenantCapReached, match=f"tenant '{tenant}' was billed \\$[0-9.]+ today"):
        await start(client, settings, run)
    assert len(openai_server.chat_requests(key=key)) == 1
