"""When a session's context is compacted (workflows/compaction.py `due`): at a turn's end, once the
last model call's context reached the session's `compact_after_tokens`. Pure: no server."""

import pytest

from ratchet.contracts import STATE_VERSION, AgentRun, AgentState, Budget, ModelSettings, RunPlan, SessionPolicy
from ratchet.workflows import compaction

THRESHOLD = 1_000


def plan(session: SessionPolicy | None) -> RunPlan:
    model = ModelSettings(provider="p", model="m")
    return RunPlan(
        agent="a",
        system_prompt="s",
        model=model,
        tools=[],
        budget=Budget(),
        workspace="w",
        call_ref="r",
        session=session,
    )


def answered(context_tokens: int, transcript: str | None = "digest") -> AgentState:
    """A session whose last model call's prompt and reply came to `context_tokens`."""
    state = AgentState(v=STATE_VERSION, workflow_id="s", run=AgentRun(agent="a", objective="o"))
    state.conversation.transcript, state.conversation.context_tokens = transcript, context_tokens
    return state


SESSION = plan(SessionPolicy(compact_after_tokens=THRESHOLD))


@pytest.mark.parametrize("tokens,due", [(THRESHOLD - 1, False), (THRESHOLD, True), (50 * THRESHOLD, True)])
def test_the_context_is_compacted_once_the_last_call_reached_the_threshold(tokens, due):
    assert compaction.due(answered(tokens), SESSION) is due


def test_a_session_without_a_threshold_is_never_compacted():
    assert not compaction.due(answered(10**9), plan(SessionPolicy()))


def test_a_run_that_is_not_a_session_is_never_compacted():
    assert not compaction.due(answered(10**9), plan(None))


def test_a_session_the_model_has_seen_nothing_of_has_nothing_to_summarise():
    # no transcript: the model never answered (or a rollback went back to the start)
    assert not compaction.due(answered(10 * THRESHOLD, transcript=None), SESSION)


def test_after_a_compaction_or_a_failed_one_it_waits_for_the_next_call_to_measure_the_context():
    state = answered(10 * THRESHOLD)
    state.conversation.context_tokens = 0  # what `compact` leaves, done or failed
    assert not compaction.due(state, SESSION)
