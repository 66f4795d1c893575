"""`guardrail.judge`: a judge guardrail's model call (ratchet/contracts/guardrails.py `Judge`).

The judge model (any provider of the worker, through the same seam as the run's model) is told
what it judges and asked the guardrail's question; it answers PASS or FAIL, then why. The call runs
under the exactly-once protocol as an idempotent call (`{workflow id}/{step}/judge-{guardrail}-
{call}`): a retry after a lost completion returns the recorded verdict instead of asking again.
Anything but a reply that starts with PASS is a FAIL (a judge that cannot say is not a pass).
"""

from __future__ import annotations

from temporalio import activity
from temporalio.exceptions import ApplicationError

from ratchet.contracts import ErrorType, Message
from ratchet.contracts.activities import GUARDRAIL_JUDGE
from ratchet.contracts.judging import JudgeRequest, JudgeVerdict
from ratchet.core import keys
from ratchet.models.provider import ModelCall, ProviderRegistry
from ratchet.stores.billing import BillingStore
from ratchet.stores.ledger import Ledger
from . import billing, caller, exactly_once
from .heartbeat import heartbeating

INSTRUCTIONS = (
    "You are a guardrail. You are given a question and a text an AI agent produced. Answer the question "
    "about the text with one word first, PASS if the text is acceptable or FAIL if it is not, then one "
    "sentence saying why."
)


class JudgeActivities:
    def __init__(
        self, providers: ProviderRegistry, ledger: Ledger | None = None, billing: BillingStore | None = None
    ) -> None:
        self.providers, self.ledger, self.billing = providers, ledger, billing

    @activity.defn(name=GUARDRAIL_JUDGE.name)
    async def judge(self, req: JudgeRequest) -> JudgeVerdict:
        key = keys.call_key(caller.workflow_id(), req.step, f"judge-{req.guardrail}-{req.call}")
        attempt = billing.Attempt(key, req.step, 0, judge=True)
        call = exactly_once.Call(
            key=key,
            act=lambda: self._ask(req, key, attempt),
            result=lambda verdict, _undo: verdict.model_copy(
                update={"billed": billing.bill(self.billing, billing.answered(attempt, verdict.usage) or attempt, 0)}
            ),
            recorded=JudgeVerdict.model_validate,
            what=GUARDRAIL_JUDGE.name,
            prepare=lambda: billing.earlier(self.billing, attempt),
            idempotent=True,
            claims=False,  # its entry only read before acting: one ledger write a call
        )
        try:
            return await exactly_once.run(self.ledger, call)
        except Exception as exc:
            raise await billing.failed(self.billing, attempt, 0, exc) from None

    async def _ask(self, req: JudgeRequest, key: str, attempt: billing.Attempt) -> JudgeVerdict:
        provider = self.providers.get(req.settings.provider)
        if provider is None:
            raise ApplicationError(
                f"judge provider {req.settings.provider!r} is not registered on this worker",
                type=ErrorType.INVALID_PROFILE,
            )
        messages = [
            Message(role="system", content=INSTRUCTIONS),
            Message(role="user", content=f"Question: {req.question}\n\nText:\n{req.text}"),
        ]
        async with heartbeating():
            meter = attempt.sending(req.settings, messages, [])
            done = await provider.complete(
                ModelCall(
                    key=key, settings=req.settings, tools=[], messages=messages, turn=0, step=req.step, meter=meter
                )
            )
        said = (done.message.content or "").strip()
        return JudgeVerdict(
            passed=said.upper().startswith("PASS"), reason=said[:500] or "(no answer)", usage=done.usage
        )
