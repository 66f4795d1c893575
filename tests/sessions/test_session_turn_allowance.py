"""A session turn's own token budget bounds what its model calls may spend, as the run's does:
a call the turn cannot cover is never made; the turn ends BUDGET_EXHAUSTED, the session goes on
(waiting for the next message, not failed)."""

from __future__ import annotations

from ratchet.contracts import TurnStatus
from tests.runs import start, wait_for
from tests.sessions.test_sessions import awaiting, session

LONG = "Please read this carefully. " * 400  # about 11,000 characters: about 2,800 prompt tokens


async def test_a_call_the_turn_cannot_cover_is_not_made_and_the_session_goes_on(client, settings, worker):
    run = await start(client, settings, session([{"content": "one"}, {"content": "two"}], turn_max_tokens=1500))
    await wait_for(run, awaiting)
    calls_before = (await run.state()).used.model_calls
    over = await run.ask(LONG)
    assert over.status == TurnStatus.BUDGET_EXHAUSTED, over
    assert (over.error or "").startswith("turn token budget exhausted: the next model call needs about "), over.error
    state = await wait_for(run, awaiting)
    assert state.used.model_calls == calls_before, "the call that could not fit was never made"
    # the session goes on; the long message stays in its conversation, so each turn is refused alike
    again = await run.ask("and now?")
    assert again.status == TurnStatus.BUDGET_EXHAUSTED and again.error.startswith("turn token budget exhausted")
    assert (await wait_for(run, awaiting)).used.model_calls == calls_before
