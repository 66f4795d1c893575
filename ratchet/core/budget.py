"""Budget arithmetic: pure functions, no I/O, used inside the workflow."""

from __future__ import annotations

from ratchet.contracts import Budget, BudgetUsed, ModelSettings, Usage


def exhausted(budget: Budget, used: BudgetUsed, elapsed_s: float) -> str | None:
    """Why another step may not start, or None if it may."""
    if used.steps >= budget.max_steps:
        return f"step budget exhausted: {used.steps} of {budget.max_steps} steps used"
    tokens = used.prompt_tokens + used.completion_tokens
    if tokens >= budget.max_tokens:
        return f"token budget exhausted: {tokens} of {budget.max_tokens} tokens used"
    if budget.max_cost_usd is not None and used.cost_usd >= budget.max_cost_usd:
        return f"cost budget exhausted: ${used.cost_usd:.4f} of ${budget.max_cost_usd:.4f} spent"
    if budget.max_duration_s is not None and elapsed_s >= budget.max_duration_s:
        return f"time budget exhausted: {elapsed_s:.0f}s of {budget.max_duration_s:.0f}s elapsed"
    return None


def charge(used: BudgetUsed, usage: Usage, settings: ModelSettings) -> None:
    used.model_calls += 1
    used.prompt_tokens += usage.prompt_tokens
    used.completion_tokens += usage.completion_tokens
    used.cost_usd += (
        usage.prompt_tokens * settings.usd_per_1k_prompt_tokens
        + usage.completion_tokens * settings.usd_per_1k_completion_tokens
    ) / 1000
