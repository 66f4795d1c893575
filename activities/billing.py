"""Billing a model call's attempts (the model activity's side of ratchet/stores/billing.py).

Every attempt that sent its request is billed once, to its run, step, attempt and cause, whether
it answered or failed: from the provider's usage where it sent one (the call's `UsageMeter`: a
stream's usage chunk, Anthropic's message_start and message_delta, an error body's usage), else an
estimate from the prompt and the characters received, marked `estimated` (an attempt refused before
a word came back, a 429 or a 500 without usage, is billed nothing: providers do not bill those). A successful attempt's
row is written in the thread that writes its transcript segment, before the ledger records the
reply; a failed attempt's before the activity raises.

How the workflow learns what failed attempts cost (docs/ARCHITECTURE.md, "Billing"): Temporal
retries an activity without the workflow seeing the attempts, so each attempt reads what the
earlier attempts of the same call on the same model were billed (`Attempt.earlier`, only from
attempt 2 on) and (a) refuses to call when what is left of the run's allowance after them cannot
cover the prompt (non-retryable `BudgetExhausted`), (b) returns the running total: in the reply
(`ModelReply.billed`) or as the first detail of its failure. The workflow charges that total
once per call and model (workflows/step.py), so the next model or step sees the real allowance.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass

from temporalio import activity
from temporalio.exceptions import ApplicationError

from ratchet.contracts import Billed, Message, ModelCallConfig, ModelSettings, ToolSchema, Usage
from ratchet.core import budget
from ratchet.models.provider import UsageMeter
from ratchet.ops.metrics import note_billed
from ratchet.stores.billing import BillingRow, BillingStore, Cause


@dataclass
class Attempt:
    """One attempt of one model call, as it will be billed."""

    key: str
    step: int
    choice: int
    compaction: bool = False
    judge: bool = False
    agent: str = ""
    """The run's profile (the metrics' `agent` label)."""
    shadow: bool = False
    meter: UsageMeter | None = None
    settings: ModelSettings | None = None
    prompt: tuple[list[Message], list[ToolSchema]] = ([], [])
    """What the request sent (an estimate's prompt, counted only when one is needed)."""
    earlier: Billed | None = None
    """What earlier attempts of this call on this model were billed (None: none, or no ledger)."""
    tenant: str = ""
    tenant_spent: float | None = None
    """What the run's tenant was billed today (UTC), across its runs, when it has a daily cap."""

    def cause(self, attempt: int) -> str:
        if self.shadow:
            return Cause.SHADOW
        if self.compaction:
            return Cause.COMPACTION
        if self.judge:
            return Cause.JUDGE
        if attempt > 1:
            return Cause.RETRY
        return Cause.FALLBACK if self.choice else Cause.ANSWER

    def sending(
        self,
        settings: ModelSettings,
        messages: list[Message],
        tools: list[ToolSchema],
        config: ModelCallConfig | None = None,
    ) -> UsageMeter:
        """The request is about to go out: what an estimate needs, and the meter the provider fills."""
        self.settings, self.prompt = settings, (messages, tools)
        if config is not None:
            self.agent, self.shadow, self.tenant = config.agent, config.shadow, config.tenant
        self.meter = UsageMeter(sent=True)
        return self.meter


def answered(attempt: Attempt | None, usage: Usage) -> Attempt | None:
    """The attempt answered: its reply's usage is what it is billed (every provider returns one)."""
    if attempt is not None and attempt.meter is not None:
        attempt.meter.usage = usage
    return attempt


def prompt_chars(messages: list[Message], tools: list[ToolSchema]) -> int:
    return sum(len(t.name) + len(t.description) + len(json.dumps(t.parameters)) for t in tools) + sum(
        len(m.content or "") + sum(len(c.name) + len(c.arguments) for c in m.tool_calls) for m in messages
    )


def earlier(store: BillingStore | None, attempt: Attempt) -> None:
    """In the ledger's thread, before an attempt after the first: what the earlier ones billed."""
    info = activity.info()
    if store is not None and info.attempt > 1:
        attempt.earlier = store.billed(info.workflow_run_id or "", attempt.key, attempt.choice)


def tenant_spent(store: BillingStore | None, attempt: Attempt, config: ModelCallConfig | None) -> None:
    """In the ledger's thread, before the attempt: what its run's tenant was billed since the UTC
    day began, when the tenant has a daily cap (RATCHET_TENANT_DAILY_USD)."""
    if store is not None and config is not None and config.tenant and config.daily_cap_usd is not None:
        attempt.tenant_spent = store.spent_today(config.tenant)


def bill(store: BillingStore | None, attempt: Attempt | None, received: int, error: str = "") -> Billed | None:
    """In a thread: this attempt's row written (once), and the call's running total on this model.
    None: no billing ledger, or the request never went out (nothing billed)."""
    if attempt is None:
        return None
    if store is None or attempt.meter is None or attempt.settings is None:
        return attempt.earlier
    settings, info = attempt.settings, activity.info()
    usage, estimated = attempt.meter.usage, False
    if usage is None and received == 0:  # refused (429, a 500 without usage) or lost before a word: not billed
        usage = Usage()
    elif usage is None:  # cut while it wrote, and the provider said nothing: the prompt and what came
        estimated = True
        usage = Usage(
            prompt_tokens=budget.prompt_estimate(prompt_chars(*attempt.prompt), len(attempt.prompt[0])),
            completion_tokens=-(-received // budget.CHARS_PER_TOKEN),
        )
    row = BillingRow(
        workflow_id=info.workflow_id or "",
        run_id=info.workflow_run_id or "",
        call_key=attempt.key,
        choice=attempt.choice,
        attempt=info.attempt,
        step=attempt.step,
        cause=attempt.cause(info.attempt),
        provider=settings.provider,
        model=settings.model,
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        cache_read_tokens=usage.cache_read_tokens,
        cache_write_tokens=usage.cache_write_tokens,
        cost_usd=budget.cost(usage, settings),
        estimated=estimated,
        priced=settings.priced,
        error=error,
        tenant=attempt.tenant,
    )
    store.bill(row)
    note_billed(row, attempt.agent, attempt.tenant)
    return row.billed() if attempt.earlier is None else attempt.earlier.add(row.billed())


def allowance(
    tokens_left: int | None, cost_left: float | None, earlier: Billed | None
) -> tuple[int | None, float | None]:
    """What is left for this attempt once the earlier attempts of the call are paid for."""
    if earlier is None:
        return tokens_left, cost_left
    tokens = None if tokens_left is None else tokens_left - earlier.total_tokens
    cost = None if cost_left is None else cost_left - earlier.cost_usd
    return tokens, cost


async def failed(store: BillingStore | None, attempt: Attempt, received: int, exc: BaseException) -> BaseException:
    """The attempt failed: billed, and the error to raise, carrying the call's billed total as its
    first detail (for the workflow to charge) and otherwise as it was classified."""
    billed = await asyncio.to_thread(
        bill,
        store,
        attempt,
        received,
        type(exc).__name__ if not isinstance(exc, ApplicationError) else (exc.type or "ApplicationError"),
    )
    if billed is None:
        return exc
    if isinstance(exc, ApplicationError):
        return ApplicationError(
            exc.message,
            billed.model_dump(),
            type=exc.type,
            non_retryable=exc.non_retryable,
            next_retry_delay=exc.next_retry_delay,
        )
    return ApplicationError(f"{type(exc).__name__}: {exc}", billed.model_dump(), type=type(exc).__name__)
