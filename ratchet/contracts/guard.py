"""A deploy guard's criteria: parsed from their text and judged against two builds' figures (pure,
for the client that checks a request, the guard's workflow and its evaluation activity).

    failure_rate<=0.05, verifier_pass>=0.9, budget_exhausted<=0.1, cost_per_run<=1.2x, flagged<=0.05

Each criterion is `term op number`, op one of `<= >= < >`; `x` after the number makes the threshold
that many times the baseline build's own figure. The terms are `Term` (ratchet/contracts/deploy.py).

Judging (`judge`): a criterion is judged once the ramped build has `min_runs` finished runs in the
window. Before that, a rate is judged only if it is broken whatever the missing runs turn out to be
(3 failed runs with `min_runs` 10 break `failure_rate<=0.2`: at best 3 of 10), so a broken build is
rolled back on its first failures, not after `min_runs` of them; a mean (`cost_per_run`) waits. A
relative criterion whose baseline has no figure (no runs of it) is not judged and does not block.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable

from ratchet.contracts.deploy import (
    BuildFigures,
    Criterion,
    CriterionResult,
    GuardRequest,
    Op,
    Term,
    Verdict,
)

_CRITERION = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(<=|>=|<|>)\s*(\d+(?:\.\d*)?|\.\d+)\s*(x?)\s*$")
_TERM = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)")
_COMPARE: dict[Op, Callable[[float, float], bool]] = {
    Op.LE: operator.le,
    Op.GE: operator.ge,
    Op.LT: operator.lt,
    Op.GT: operator.gt,
}
TERMS = ", ".join(t.value for t in Term)
SYNTAX = "each criterion is `term op number` (op <= >= < >; `1.2x`: 1.2 times the baseline's figure)"


def parse_criteria(text: str) -> list[Criterion]:
    """The criteria in `text`; ValueError naming the unknown term, or quoting what does not parse."""
    parts = [p.strip() for p in text.split(",")]
    if not any(parts):
        raise ValueError(f"guard has no criterion: {SYNTAX}; terms: {TERMS}")
    return [_criterion(part) for part in parts]


def _criterion(part: str) -> Criterion:
    if not part:
        raise ValueError(f"guard has an empty criterion (two commas in a row?): {SYNTAX}")
    named = _TERM.match(part)
    if named is not None and named.group(1) not in Term._value2member_map_:
        raise ValueError(f"unknown guard term {named.group(1)!r} in {part!r}; terms: {TERMS}")
    found = _CRITERION.match(part)
    if found is None:
        raise ValueError(f"guard criterion {part!r} does not parse: {SYNTAX}")
    term, op, number, relative = found.groups()
    return Criterion(term=Term(term), op=Op(op), threshold=float(number), relative=bool(relative))


def request_problems(request: GuardRequest) -> list[str]:
    """What is wrong with a guard request before anything is changed (the criteria are checked by
    `parse_criteria`)."""
    problems = []
    steps = request.steps
    if not steps:
        problems.append("steps: at least one ramp percentage")
    for pct in steps:
        if not 0 < pct <= 100:
            problems.append(f"ramp percentage {pct:g} is outside 0-100 (each step above 0, at most 100)")
    if any(b <= a for a, b in zip(steps, steps[1:])):
        problems.append(f"steps {', '.join(f'{p:g}' for p in steps)} must rise")
    if request.window_s <= 0:
        problems.append(f"window {request.window_s:g}s: must be above 0")
    if request.interval_s <= 0:
        problems.append(f"interval {request.interval_s:g}s: must be above 0")
    if request.min_runs < 1:
        problems.append(f"min_runs {request.min_runs}: at least 1")
    if request.baseline is not None and request.baseline == request.build:
        problems.append(f"build {request.build!r} is the baseline (current) build: nothing to ramp")
    return problems


def _rate(term: Term, figures: BuildFigures) -> tuple[int, int] | None:
    """(numerator, denominator) of a rate term; None for a mean."""
    if term == Term.FAILURE_RATE:
        return figures.failed, figures.runs
    if term == Term.BUDGET_EXHAUSTED:
        return figures.budget_exhausted, figures.runs
    if term == Term.FLAGGED:
        return min(figures.flagged, figures.runs) if figures.runs else figures.flagged, figures.runs
    if term == Term.VERIFIER_PASS:
        return figures.verifier_passed, figures.verifier_runs
    return None


def value(term: Term, figures: BuildFigures) -> float | None:
    """The build's figure for `term`; None without runs to compute it from."""
    rate = _rate(term, figures)
    if rate is None:
        return figures.cost_usd / figures.runs if figures.runs else None
    k, n = rate
    return k / n if n else None


def _best_case(criterion: Criterion, figures: BuildFigures, min_runs: int) -> float | None:
    """The rate if every run still missing to `min_runs` turns out well; None for a mean."""
    rate = _rate(criterion.term, figures)
    if rate is None:
        return None
    k, n = rate
    missing = max(0, min_runs - figures.runs)
    if n + missing == 0:
        return None
    good_is_low = criterion.op in (Op.LE, Op.LT)
    return k / (n + missing) if good_is_low else (k + missing) / (n + missing)


def judge_one(criterion: Criterion, ramped: BuildFigures, baseline: BuildFigures, min_runs: int) -> CriterionResult:
    result = CriterionResult(criterion=str(criterion), value=value(criterion.term, ramped))
    limit: float | None = criterion.threshold
    if criterion.relative:
        base = value(criterion.term, baseline)
        limit = None if base is None else criterion.threshold * base
    result.limit = limit
    if limit is None:
        return result
    compare = _COMPARE[criterion.op]
    if ramped.runs >= min_runs and result.value is not None:
        result.held = compare(result.value, limit)
        return result
    best = _best_case(criterion, ramped, min_runs)
    if best is not None and not compare(best, limit):
        result.held = False
    return result


def judge(
    criteria: list[Criterion], ramped: BuildFigures, baseline: BuildFigures, min_runs: int
) -> tuple[list[CriterionResult], Verdict, str]:
    """Each criterion's result, the verdict and its reason (the broken criteria with their figures)."""
    results = [judge_one(c, ramped, baseline, min_runs) for c in criteria]
    broken = [r for r in results if r.held is False]
    if broken:
        said = "; ".join(f"{r.criterion} broken: {_fmt(r.value)} against {_fmt(r.limit)}" for r in broken)
        return results, Verdict.BROKEN, f"{said} ({_counts(ramped)})"
    if ramped.runs < min_runs:
        return results, Verdict.WAITING, f"{ramped.runs} of {min_runs} runs of {ramped.build} finished"
    return results, Verdict.HOLDS, f"every criterion holds ({_counts(ramped)})"


def _fmt(number: float | None) -> str:
    return "none" if number is None else f"{number:.4g}"


def _counts(figures: BuildFigures) -> str:
    return (
        f"{figures.runs} runs of {figures.build}: {figures.failed} failed, {figures.budget_exhausted} "
        f"out of budget, {figures.verifier_passed} of {figures.verifier_runs} passed a verifier, "
        f"{figures.flagged} flagged, ${figures.cost_usd:.4g}"
    )
