"""Budgets (ratchet/core/budget.py): when a step may not start, what a call costs and may spend;
and a session turn's own budget (workflows/sessions.py `spent`, `turn_exhausted`). Pure: no server."""

import pytest

from ratchet.contracts import (
    STATE_VERSION,
    AgentRun,
    AgentState,
    Budget,
    BudgetUsed,
    ModelSettings,
    RunPlan,
    SessionPolicy,
    Turn,
    TurnStatus,
    TurnUsed,
    Usage,
)
from ratchet.core.budget import SENT_BELOW, allowance, charge, cost, exhausted, output_cap, overrun, prompt_estimate
from ratchet.workflows import sessions

BUDGET = Budget(max_steps=10, max_tokens=1_000, max_cost_usd=0.5, max_duration_s=60)


def used(steps: int = 0, prompt: int = 0, completion: int = 0, usd: float = 0.0) -> BudgetUsed:
    return BudgetUsed(steps=steps, prompt_tokens=prompt, completion_tokens=completion, cost_usd=usd)


def priced(prompt: float = 0.0, completion: float = 0.0, **fields) -> ModelSettings:
    return ModelSettings(
        provider="p", model="m", usd_per_1k_prompt_tokens=prompt, usd_per_1k_completion_tokens=completion, **fields
    )


# --- when a step may not start -------------------------------------------------------------------


def test_a_run_within_every_limit_may_take_a_step():
    assert exhausted(BUDGET, used(steps=9, prompt=600, completion=399, usd=0.4999), elapsed_s=59.9) is None


def test_the_last_step_used_up_the_step_budget():
    assert exhausted(BUDGET, used(steps=10), 0) == "step budget exhausted: 10 of 10 steps used"


def test_the_step_budget_is_said_first_whatever_else_ran_out():
    assert exhausted(BUDGET, used(steps=10, prompt=5_000, usd=9.0), 600).startswith("step budget exhausted")


def test_tokens_that_reach_the_budget_exhaust_it_and_tokens_past_it_say_by_how_much():
    assert exhausted(BUDGET, used(prompt=600, completion=400), 0) == "token budget exhausted: 1000 of 1000 tokens used"
    assert overrun(BUDGET, used(prompt=600, completion=400)) is None
    over = exhausted(BUDGET, used(prompt=600, completion=450), 0)
    assert over == (
        "token budget exceeded: 1050 of 1000 tokens used, 50 over (the model used more than its last call was allowed)"
    )
    assert overrun(BUDGET, used(prompt=600, completion=450)) == over


def test_cost_that_reaches_the_budget_exhausts_it_and_a_rounding_error_past_it_is_no_overrun():
    assert exhausted(BUDGET, used(usd=0.5), 0) == "cost budget exhausted: $0.5000 of $0.5000 spent"
    assert overrun(BUDGET, used(usd=0.50001)) is None, "less than the $0.0001 a message can show"
    assert exhausted(BUDGET, used(usd=0.50001), 0).startswith("cost budget exhausted")
    assert overrun(BUDGET, used(usd=0.5012)) == (
        "cost budget exceeded: $0.5012 of $0.5000 spent, $0.0012 over "
        "(the model used more than its last call was allowed)"
    )


def test_without_a_cost_or_time_limit_neither_stops_a_run():
    budget = Budget(max_steps=10, max_tokens=1_000)
    assert exhausted(budget, used(usd=1_000.0), elapsed_s=10**7) is None
    assert overrun(budget, used(usd=1_000.0)) is None


def test_the_deadline_stops_the_next_step():
    assert exhausted(BUDGET, used(), elapsed_s=60.4) == "time budget exhausted: 60s of 60s elapsed"


# --- what a call costs ---------------------------------------------------------------------------


def test_cached_input_is_priced_apart_from_the_rest_of_the_prompt():
    settings = priced(3.0, 15.0, usd_per_1k_cache_read_tokens=0.3, usd_per_1k_cache_write_tokens=3.75)
    usage = Usage(prompt_tokens=1_000, completion_tokens=200, cache_read_tokens=600, cache_write_tokens=100)
    # 300 uncached at $3, 600 read at $0.30, 100 written at $3.75, 200 out at $15 (per 1k)
    assert cost(usage, settings) == pytest.approx((300 * 3 + 600 * 0.3 + 100 * 3.75 + 200 * 15) / 1000)


def test_without_cache_prices_cached_input_costs_what_the_prompt_costs():
    usage = Usage(prompt_tokens=1_000, completion_tokens=200, cache_read_tokens=600, cache_write_tokens=100)
    assert cost(usage, priced(3.0, 15.0)) == pytest.approx(
        cost(Usage(prompt_tokens=1_000, completion_tokens=200), priced(3.0, 15.0))
    )
    assert cost(usage, priced(3.0, 15.0)) == pytest.approx(6.0)


def test_a_free_cache_read_leaves_only_the_uncached_prompt_and_the_output_to_pay():
    usage = Usage(prompt_tokens=1_000, completion_tokens=0, cache_read_tokens=1_000)
    assert cost(usage, priced(3.0, 15.0, usd_per_1k_cache_read_tokens=0.0)) == 0.0


def test_each_call_is_charged_its_tokens_its_cache_and_its_cost():
    spent, settings = BudgetUsed(steps=3), priced(1.0, 2.0, usd_per_1k_cache_read_tokens=0.5)
    usage = Usage(prompt_tokens=1_000, completion_tokens=500, cache_read_tokens=400, cache_write_tokens=10)
    charge(spent, usage, settings)
    charge(spent, usage, settings)
    assert (spent.model_calls, spent.prompt_tokens, spent.completion_tokens) == (2, 2_000, 1_000)
    assert (spent.cache_read_tokens, spent.cache_write_tokens, spent.steps) == (800, 20, 3), "steps are the loop's"
    assert spent.cost_usd == pytest.approx(2 * cost(usage, settings)) and spent.cost_usd == pytest.approx(3.6)


# --- what the next call may spend ----------------------------------------------------------------


def test_the_allowance_is_what_is_left_and_none_without_a_cost_budget():
    assert allowance(BUDGET, used(prompt=300, completion=100, usd=0.2)) == (600, pytest.approx(0.3))
    assert allowance(Budget(max_tokens=1_000), used(prompt=1_100)) == (-100, None), "an overshoot leaves less than 0"


def test_a_prompt_is_estimated_at_four_characters_a_token_and_four_tokens_a_message():
    assert prompt_estimate(chars=401, messages=3) == 101 + 12
    assert prompt_estimate(0, 0) == 0


def test_with_no_limit_to_keep_no_cap_is_sent_unless_the_model_has_one():
    assert output_cap(None, None, 500, priced()) is None
    assert output_cap(None, None, 500, priced(max_output_tokens=2_000)) == 2_000


def test_the_output_is_capped_at_the_tokens_the_prompt_leaves():
    assert output_cap(1_000, None, 400, priced()) == 600
    assert output_cap(1_000, None, 400, priced(max_output_tokens=300)) == 300, "the model's own cap is lower"
    assert output_cap(1_000, None, 400, priced(max_output_tokens=2_000)) == 600


def test_a_cap_too_large_to_matter_is_not_sent():
    assert output_cap(400 + SENT_BELOW, None, 400, priced()) is None
    assert output_cap(400 + SENT_BELOW - 1, None, 400, priced()) == SENT_BELOW - 1


def test_a_prompt_that_leaves_no_output_token_is_refused_with_the_reason():
    assert output_cap(400, None, 400, priced()) == (
        "token budget exhausted: the next model call needs about 400 prompt tokens and 400 tokens are left"
    )
    assert output_cap(-50, None, 400, priced()).endswith("and 0 tokens are left"), "an overshoot says 0, not -50"


def test_the_output_is_capped_at_what_the_dollars_left_buy_after_the_prompt():
    settings = priced(prompt=1.0, completion=2.0)  # $0.001 a prompt token, $0.002 an output token
    assert output_cap(None, 1.0, 200, settings) == 400  # $0.80 left after the prompt
    assert output_cap(300, 1.0, 200, settings) == 100, "the tokens left cap it lower"


def test_a_prompt_the_dollars_left_do_not_pay_for_is_refused_with_the_reason():
    assert output_cap(None, 0.01, 1_000, priced(prompt=1.0, completion=2.0)) == (
        "cost budget exhausted: the next model call would cost more than the $0.0100 left "
        "(about $1.0000 for its prompt alone)"
    )
    assert "than the $0.0000 left" in output_cap(None, -0.2, 1, priced(prompt=1.0, completion=2.0))


def test_free_output_is_not_capped_by_the_cost_budget_but_its_prompt_still_must_fit():
    assert output_cap(None, 0.5, 400, priced(prompt=1.0)) is None
    assert output_cap(None, 0.1, 400, priced(prompt=1.0)).startswith("cost budget exhausted")


# --- a session turn's own budget -----------------------------------------------------------------


def session(policy: SessionPolicy | None, status: TurnStatus = TurnStatus.RUNNING) -> AgentState:
    """A session whose turn 3 began at 10 steps, 5,000 tokens and $1 spent, and has spent since."""
    plan = RunPlan(
        agent="a",
        system_prompt="s",
        model=priced(),
        tools=[],
        budget=Budget(),
        workspace="w",
        call_ref="r",
        session=policy,
    )
    state = AgentState(v=STATE_VERSION, workflow_id="s", run=AgentRun(agent="a", objective="o"), plan=plan)
    before = TurnUsed(steps=10, tokens=5_000, cost_usd=1.0)
    turn = Turn(number=3, question="q", started_at="t", first_message=9, first_step=10, status=status, before=before)
    state.session.turns.reset([turn], base=2)
    state.used = BudgetUsed(steps=12, prompt_tokens=5_600, completion_tokens=300, cost_usd=1.3)
    return state


def test_a_turn_spent_what_the_session_spent_since_it_began():
    state = session(SessionPolicy())
    spent = sessions.spent(state, state.session.turns.last)
    assert (spent.steps, spent.tokens) == (2, 900)
    assert spent.cost_usd == 0.3, "rounded: not 0.30000000000000004"


def test_a_turn_that_reached_its_step_budget_takes_no_more_steps():
    assert sessions.turn_exhausted(session(SessionPolicy(turn_max_steps=3))) is None
    assert sessions.turn_exhausted(session(SessionPolicy(turn_max_steps=2))) == (
        "turn budget exhausted: 2 of 2 steps used"
    )


def test_a_turn_that_reached_its_token_budget_takes_no_more_steps():
    assert sessions.turn_exhausted(session(SessionPolicy(turn_max_tokens=901))) is None
    assert sessions.turn_exhausted(session(SessionPolicy(turn_max_tokens=900, turn_max_steps=5))) == (
        "turn budget exhausted: 900 of 900 tokens used"
    )


def test_a_turn_budget_counts_only_the_turn_in_flight():
    unlimited = session(SessionPolicy())
    assert sessions.turn_exhausted(unlimited) is None, "no turn budget: the session's own budget alone"
    answered = session(SessionPolicy(turn_max_steps=1), status=TurnStatus.ANSWERED)
    assert sessions.turn_exhausted(answered) is None, "between turns there is no turn to stop"
    assert sessions.turn_exhausted(session(None)) is None, "not a session"
