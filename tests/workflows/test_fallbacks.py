"""Fallback models on the real dev server: a step whose call keeps failing with retryable errors on
the primary (the local OpenAI server answering 500) moves to the fallback (the local Anthropic
server) under the same key, recorded in history and in the transcript; a bad request does not fall
through; a fallback naming an unknown provider fails the run at once naming the field."""

from __future__ import annotations

from datetime import timedelta

import pytest

from ratchet.client import RatchetClient, RunFailed
from ratchet.contracts import ModelChoice, Phase
from ratchet.core.profiles import AgentProfile, register_profile
from ratchet.worker.main import build_worker
from tests.runs import activity_attempts, start

register_profile(
    AgentProfile(
        name="fallback-probe",
        system_prompt="s",
        tools=[],
        provider="openai",
        fallbacks=[ModelChoice(provider="anthropic")],
        fallback_after_attempts=2,
    )
)
register_profile(
    AgentProfile(name="bad-fallback", system_prompt="s", tools=[], fallbacks=[ModelChoice(provider="gemini")])
)


async def test_a_failing_primary_falls_back_to_the_next_model_under_the_same_key(
    client, settings, openai_server, openai_key, anthropic_server, anthropic_key
):
    openai_server.enqueue_faults([{"status": 500}] * 2, key=openai_key)
    anthropic_server.set_script([{"content": "from the fallback"}], key=anthropic_key)
    async with build_worker(client, settings, graceful_shutdown_timeout=timedelta(0)):
        run = await RatchetClient(client, settings).start({"agent": "fallback-probe", "objective": "o"})
        result = await run.result()
        page = await run.transcript()
    assert result.phase == Phase.DONE and result.answer == "from the fallback"
    assert len(openai_server.chat_requests(key=openai_key)) == 2
    assert await activity_attempts(run, "model.call") == [2, 1]  # the primary gave up at attempt 2
    assert page.messages[-1].answered_by == "anthropic/claude-sonnet-4-5"
    [request] = anthropic_server.requests_of(anthropic_key)
    assert request.status == 200


async def test_a_non_retryable_error_of_the_primary_does_not_fall_through(
    client, settings, openai_server, openai_key, anthropic_server, anthropic_key
):
    openai_server.enqueue_faults([{"status": 400}], key=openai_key)
    async with build_worker(client, settings, graceful_shutdown_timeout=timedelta(0)):
        handle = await start(client, settings, {"agent": "fallback-probe", "objective": "o"})
        with pytest.raises(RunFailed) as failure:
            await handle.result()
    assert "answered 400" in failure.value.reason
    assert anthropic_server.requests_of(anthropic_key) == []


async def test_a_fallback_naming_an_unknown_provider_fails_the_run_naming_the_field(client, settings, worker):
    handle = await start(client, settings, {"agent": "bad-fallback", "objective": "o"})
    with pytest.raises(RunFailed) as failure:
        await handle.result()
    assert "profile 'bad-fallback': fallbacks.0.provider: unknown provider 'gemini'" in failure.value.reason
