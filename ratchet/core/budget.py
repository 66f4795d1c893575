"""Budget arithmetic: pure functions, no I/O, used inside the workflow and by the model activity.

Every limit is hard:
- steps are counted at the step boundary (`exhausted`);
- the deadline (`max_duration_s`) is a durable timer that interrupts the step in flight
  (workflows/interrupts.py), and is checked at the boundary too;
- tokens and cost cannot be taken back once a provider has counted them, so every model call
  carries what is left (`allowance`): the model activity refuses a call whose prompt alone would
  not fit and caps its output at what is left (`output_cap`). The prompt's size is an estimate
  (`prompt_estimate`), so a provider that counts more tokens than estimated, or ignores the cap,
  can still overshoot; `exhausted` then says by how much.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ratchet.contracts import Billed, Budget, BudgetUsed, ModelSettings, Usage

CHARS_PER_TOKEN = 4
"""The prompt estimate's rule of thumb (English text and code average about 4 characters a token)."""
TOKENS_PER_MESSAGE = 4
"""What a chat template adds per message (role markers, separators)."""
OVERSHOT = "the model used more than its last call was allowed"
SENT_BELOW = 4096
"""Without a `max_output_tokens` of its own, a call is capped only once fewer output tokens than
this fit: a cap above what a model supports is an error on some servers (OpenAI's, vLLM), and a
reply this long is rare. So an earlier call can overshoot too, by what its reply exceeded what
was left; `exhausted` says by how much."""


def exhausted(budget: Budget, used: BudgetUsed, elapsed_s: float) -> str | None:
    """Why another step may not start, or None if it may."""
    if used.steps >= budget.max_steps:
        return f"step budget exhausted: {used.steps} of {budget.max_steps} steps used"
    over = overrun(budget, used)
    if over:
        return over
    tokens = used.prompt_tokens + used.completion_tokens
    if tokens >= budget.max_tokens:
        return f"token budget exhausted: {tokens} of {budget.max_tokens} tokens used"
    if budget.max_cost_usd is not None and used.cost_usd >= budget.max_cost_usd:
        return f"cost budget exhausted: ${used.cost_usd:.4f} of ${budget.max_cost_usd:.4f} spent"
    if budget.max_duration_s is not None and elapsed_s >= budget.max_duration_s:
        return f"time budget exhausted: {elapsed_s:.0f}s of {budget.max_duration_s:.0f}s elapsed"
    return None


def overrun(budget: Budget, used: BudgetUsed) -> str | None:
    """By how much the tokens or the cost spent went past the budget (a provider overshot), or None."""
    tokens = used.prompt_tokens + used.completion_tokens
    if tokens > budget.max_tokens:
        return (
            f"token budget exceeded: {tokens} of {budget.max_tokens} tokens used, "
            f"{tokens - budget.max_tokens} over ({OVERSHOT})"
        )
    if budget.max_cost_usd is not None and used.cost_usd - budget.max_cost_usd >= 0.00005:
        return (
            f"cost budget exceeded: ${used.cost_usd:.4f} of ${budget.max_cost_usd:.4f} spent, "
            f"${used.cost_usd - budget.max_cost_usd:.4f} over ({OVERSHOT})"
        )
    return None


def charge(used: BudgetUsed, usage: Usage, settings: ModelSettings, billed: Billed | None = None) -> None:
    """A model call that answered: what the billing ledger billed for all its attempts on this model
    (`billed`), or, on a worker without one, its reply's usage at the settings' prices."""
    used.model_calls += 1
    if billed is None:
        billed = Billed(**usage.model_dump(), cost_usd=cost(usage, settings), attempts=1, unpriced=not settings.priced)
    spend(used, billed)


def spend(used: BudgetUsed, billed: Billed) -> None:
    """Billed attempts (a call that failed: its failure's details carry them) count against the budget."""
    used.prompt_tokens += billed.prompt_tokens
    used.completion_tokens += billed.completion_tokens
    used.cache_read_tokens += billed.cache_read_tokens
    used.cache_write_tokens += billed.cache_write_tokens
    used.cost_usd += billed.cost_usd
    used.cost_unknown = used.cost_unknown or billed.unpriced


def billed_of(details: Sequence[Any] | None) -> Billed | None:
    """A failed model call's billed attempts, from its failure's first detail (activities/billing.py);
    None when it carries none (no billing ledger, or the request never went out)."""
    if details and isinstance(details[0], dict) and "attempts" in details[0]:
        return Billed.model_validate(details[0])
    return None


def cost(usage: Usage, settings: ModelSettings) -> float:
    """What a call cost at the settings' prices: cache reads and writes at their own prices."""
    prompt = settings.usd_per_1k_prompt_tokens
    read = prompt if settings.usd_per_1k_cache_read_tokens is None else settings.usd_per_1k_cache_read_tokens
    write = prompt if settings.usd_per_1k_cache_write_tokens is None else settings.usd_per_1k_cache_write_tokens
    uncached = usage.prompt_tokens - usage.cache_read_tokens - usage.cache_write_tokens
    return (
        uncached * prompt
        + usage.cache_read_tokens * read
        + usage.cache_write_tokens * write
        + usage.completion_tokens * settings.usd_per_1k_completion_tokens
    ) / 1000


def allowance(budget: Budget, used: BudgetUsed) -> tuple[int, float | None]:
    """What the next model call may spend: tokens left, and dollars left (None: no cost budget)."""
    tokens_left = budget.max_tokens - used.prompt_tokens - used.completion_tokens
    cost_left = None if budget.max_cost_usd is None else budget.max_cost_usd - used.cost_usd
    return tokens_left, cost_left


def prompt_estimate(chars: int, messages: int) -> int:
    """Tokens a prompt of `messages` messages holding `chars` characters (tool schemas included) is
    likely to count: an estimate, never exact (see CHARS_PER_TOKEN)."""
    return -(-chars // CHARS_PER_TOKEN) + TOKENS_PER_MESSAGE * messages


def output_cap(
    tokens_left: int | None, cost_left: float | None, prompt: int, settings: ModelSettings
) -> int | None | str:
    """The most output tokens a call whose prompt is about `prompt` tokens may ask for: what is
    left of the budget, within the model's own `max_output_tokens` (None: no cap to send, see
    SENT_BELOW); or, when not one output token fits, why."""
    caps = []
    if tokens_left is not None:
        caps.append(tokens_left - prompt)
        if caps[-1] < 1:
            return (
                f"token budget exhausted: the next model call needs about {prompt} prompt tokens "
                f"and {max(tokens_left, 0)} tokens are left"
            )
    if cost_left is not None:
        prompt_usd = prompt * settings.usd_per_1k_prompt_tokens / 1000
        per_output = settings.usd_per_1k_completion_tokens / 1000
        fits = int((cost_left - prompt_usd) / per_output) if per_output > 0 else (1 if prompt_usd <= cost_left else 0)
        if fits < 1:
            return (
                f"cost budget exhausted: the next model call would cost more than the ${max(cost_left, 0.0):.4f} "
                f"left (about ${prompt_usd:.4f} for its prompt alone)"
            )
        if per_output > 0:
            caps.append(fits)
    cap = min(caps) if caps else None
    if settings.max_output_tokens is not None:
        return settings.max_output_tokens if cap is None else min(cap, settings.max_output_tokens)
    return cap if cap is not None and cap < SENT_BELOW else None
