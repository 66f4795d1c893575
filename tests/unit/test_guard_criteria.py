"""A deploy guard's criteria (ratchet/contracts/guard.py): parsed from their text, refused naming the
term or the text that does not parse, and judged against two builds' figures (pure: no server)."""

import pytest

from ratchet.contracts import BuildFigures, GuardRequest, Op, Term, Verdict
from ratchet.contracts.guard import judge, parse_criteria, request_problems

ISSUE = "failure_rate<=0.05, verifier_pass>=0.9, budget_exhausted<=0.1, cost_per_run<=1.2x, flagged<=0.05"


def test_the_issues_expression_parses_term_by_term():
    criteria = parse_criteria(ISSUE)
    assert [(c.term, c.op, c.threshold, c.relative) for c in criteria] == [
        (Term.FAILURE_RATE, Op.LE, 0.05, False),
        (Term.VERIFIER_PASS, Op.GE, 0.9, False),
        (Term.BUDGET_EXHAUSTED, Op.LE, 0.1, False),
        (Term.COST_PER_RUN, Op.LE, 1.2, True),
        (Term.FLAGGED, Op.LE, 0.05, False),
    ]
    assert ", ".join(str(c) for c in criteria) == ISSUE
    assert str(parse_criteria(" failure_rate < .5 ")[0]) == "failure_rate<0.5"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("fail_rate<=0.05", "unknown guard term 'fail_rate' in 'fail_rate<=0.05'; terms: failure_rate,"),
        ("failure_rate<=0.05, latency<2", "unknown guard term 'latency'"),
        ("failure_rate=<0.05", "guard criterion 'failure_rate=<0.05' does not parse"),
        ("failure_rate<=", "guard criterion 'failure_rate<=' does not parse"),
        ("failure_rate<=0.05x2", "'failure_rate<=0.05x2' does not parse"),
        ("<=0.1", "guard criterion '<=0.1' does not parse"),
        ("", "guard has no criterion"),
        ("failure_rate<=0.1,,flagged<=0", "empty criterion"),
    ],
)
def test_what_does_not_parse_is_named(text, says):
    with pytest.raises(ValueError) as raised:
        parse_criteria(text)
    assert says in str(raised.value)


def figures(build="v2", **counts) -> BuildFigures:
    return BuildFigures(build=build, **counts)


def test_too_few_runs_wait_unless_the_failures_already_break_the_criterion():
    criteria = parse_criteria("failure_rate<=0.2, cost_per_run<=1.0")
    results, verdict, reason = judge(criteria, figures(runs=1, failed=0, cost_usd=5.0), figures("v1"), min_runs=5)
    assert verdict == Verdict.WAITING and reason == "1 of 5 runs of v2 finished"
    assert [r.held for r in results] == [None, None]  # a mean waits for min_runs
    # one failure of five at best is 0.2: not broken yet; two are 0.4 whatever the other three do
    assert judge(criteria, figures(runs=1, failed=1), figures("v1"), 5)[1] == Verdict.WAITING
    results, verdict, reason = judge(criteria, figures(runs=2, failed=2), figures("v1"), 5)
    assert verdict == Verdict.BROKEN and results[0].held is False
    assert reason.startswith("failure_rate<=0.2 broken: 1 against 0.2 (2 runs of v2: 2 failed")


def test_a_pass_rate_is_broken_early_when_the_missing_runs_cannot_save_it():
    criteria = parse_criteria("verifier_pass>=0.9")
    assert judge(criteria, figures(runs=1, verifier_runs=1, verifier_passed=1), figures("v1"), 10)[1] == Verdict.WAITING
    verdict = judge(criteria, figures(runs=2, verifier_runs=2, verifier_passed=0), figures("v1"), 10)[1]
    assert verdict == Verdict.BROKEN  # at best 8 of 10


def test_enough_runs_are_judged_relative_ones_against_the_baseline():
    criteria = parse_criteria("cost_per_run<=1.2x, budget_exhausted<=0.1, flagged<=0.2")
    baseline = figures("v1", runs=10, cost_usd=10.0)
    results, verdict, _ = judge(criteria, figures(runs=4, cost_usd=4.4, flagged=0), baseline, 4)
    assert verdict == Verdict.HOLDS and [r.limit for r in results] == [pytest.approx(1.2), 0.1, 0.2]
    results, verdict, reason = judge(criteria, figures(runs=4, cost_usd=6.0, flagged=1), baseline, 4)
    assert verdict == Verdict.BROKEN and [r.held for r in results] == [False, True, False]
    assert "cost_per_run<=1.2x broken: 1.5 against 1.2" in reason and "flagged<=0.2 broken: 0.25" in reason


def test_a_relative_criterion_without_a_baseline_figure_is_not_judged():
    results, verdict, _ = judge(parse_criteria("cost_per_run<=1.2x"), figures(runs=3, cost_usd=9.0), figures("v1"), 3)
    assert verdict == Verdict.HOLDS and results[0].held is None and results[0].limit is None


def test_a_request_outside_the_bounds_is_named():
    request = GuardRequest(deployment="d", build="v2", criteria="failure_rate<=0.1", steps=[10, 140], window_s=0)
    assert request_problems(request) == [
        "ramp percentage 140 is outside 0-100 (each step above 0, at most 100)",
        "window 0s: must be above 0",
    ]
    assert request_problems(request.model_copy(update={"steps": [50, 10], "window_s": 60})) == [
        "steps 50, 10 must rise"
    ]
    assert request_problems(request.model_copy(update={"steps": [0], "window_s": 60}))[0].startswith(
        "ramp percentage 0 is outside 0-100"
    )
