"""What a person or a program asks of a running run: approvals and decisions, a person's answer to a
run handed to them, messages and a session's turns, pause, resume, cancel, terminate. Each request
is validated before it is sent (InvalidInput names the field) and sent once: a closed run refuses it
(RunClosed, SessionEnded), saying how it ended (ratchet/client/rpc.py). `RunHandle` has these as its
methods."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from temporalio.client import WorkflowExecutionStatus

from ratchet.client.errors import InvalidInput, MovedOn, SessionEnded, ended
from ratchet.client.rpc import RunCalls
from ratchet.client.signing import DecisionSigner
from ratchet.contracts import (
    MAX_MESSAGE_CHARS,
    ApproveRequest,
    AskRequest,
    DecideRequest,
    FollowRequest,
    GrantRequest,
    HandoffResponse,
    OutcomeChoice,
    Phase,
    RejectRequest,
    RunMessages,
    TurnAnswer,
)
from ratchet.contracts.decisions import DecisionProof, approve_value, decision_value
from ratchet.contracts.identity import Principal

Request = TypeVar("Request", bound=BaseModel)
MOVE_WAIT_S = 300.0
"""How long `ask` and `answer` follow a session that moves before its message's turn: its old run
answers `moved` until it has handed over (its handlers finished, older effects archived: longer if
its worker died meanwhile), then its new run answers; then they return the last `moved` answer."""
MOVE_PAUSE_S = (0.05, 2.0)
"""The first and the longest pause before the old run is asked again (doubling)."""


class RunRequests:
    """The requests to the run `calls` reach; a decision is recorded as made by `identity` unless
    the caller names someone (`by`) or a `Principal`. With a signing key (`signer`: the client's
    RATCHET_SIGNING_KEY) each approve, reject and decide carries a proof (ratchet/client/signing.py)."""

    def __init__(self, calls: RunCalls, identity: str | None, signer: DecisionSigner | None = None) -> None:
        self._calls, self._identity, self._signer = calls, identity, signer
        self.workflow_id = calls.workflow_id

    async def approve(
        self,
        call_id: str,
        by: str | None = None,
        principal: Principal | None = None,
        digest: str | None = None,
        proof: DecisionProof | None = None,
        grant: GrantRequest | dict[str, Any] | None = None,
    ) -> str:
        """Approve a pending call; the decision records who (`principal`, else `by`, else this
        client's identity) and when. Each call is decided on its own: of a step's five waiting
        calls, approve three and reject two. `digest`: the call's as the person saw it (a proof
        covers it). `proof`: one signed elsewhere (a person's own device), sent as it is. `grant`
        (`{"for_s": 3600}`, optionally `patterns`) also lets later calls like it run without asking,
        in this run, for that long (ratchet/contracts/approval_policy.py); a signed approval signs it too."""
        request = _request("approval", ApproveRequest, call_id=call_id, by=self._by(by, principal), grant=grant)
        proof = proof or await self._proof(call_id, approve_value(request.grant), principal, digest)
        request = request.model_copy(update={"proof": proof})
        return await self._calls.update(RunMessages.APPROVE, request, str)

    async def reject(
        self,
        call_id: str,
        reason: str = "rejected by a person",
        by: str | None = None,
        principal: Principal | None = None,
        digest: str | None = None,
        proof: DecisionProof | None = None,
    ) -> str:
        proof = proof or await self._proof(call_id, decision_value("reject"), principal, digest)
        fields = {"call_id": call_id, "reason": reason, "by": self._by(by, principal), "proof": proof}
        return await self._calls.update(RunMessages.REJECT, _request("rejection", RejectRequest, **fields), str)

    async def decide(
        self,
        call_id: str,
        choice: OutcomeChoice | str,
        result: str | None = None,
        reason: str = "",
        by: str | None = None,
        principal: Principal | None = None,
        proof: DecisionProof | None = None,
    ) -> str:
        fields = {
            "call_id": call_id,
            "choice": choice,
            "result": result,
            "reason": reason,
            "by": self._by(by, principal),
        }
        request = _request("decision", DecideRequest, **fields)
        proof = proof or await self._proof(call_id, decision_value("decide", request.choice), principal, None)
        return await self._calls.update(RunMessages.DECIDE, request.model_copy(update={"proof": proof}), str)

    async def _proof(
        self, call_id: str, decision: str, principal: Principal | None, digest: str | None
    ) -> DecisionProof | None:
        """The request's proof: signed by this client's key as `principal` (default: the CLI's
        person of the settings), or None without a key."""
        if self._signer is None:
            return None
        who = principal or self._signer.default_principal(self._identity or "person")
        return await self._signer.proof(self.workflow_id, call_id, decision, who, digest)

    async def respond(
        self,
        action: str,
        text: str,
        to: str | None = None,
        constraints: list[str] | None = None,
        open_questions: list[str] | None = None,
        by: str | None = None,
    ) -> str:
        """A person's answer to the run handed to their inbox (AWAITING_PERSON, `ratchet inbox`):
        `finish` (`text` is the run's answer), `reply` (`text` goes to the agent, which goes on) or
        `hand_back` (the run goes on under profile `to`, `text` their notes). Refused if the run
        waits for no person, was answered already, or `to` is not a profile it may go back to."""
        fields: dict[str, Any] = {"action": action, "text": text, "to": to, "by": self._by(by, None)}
        fields |= {"constraints": constraints or [], "open_questions": open_questions or []}
        request = _request("handoff response", HandoffResponse, **fields)
        return await self._calls.update(RunMessages.RESPOND, request, str)

    async def send(self, text: str) -> None:
        """A message, fire and forget: it joins the conversation at the next step boundary (a
        session: as its message policy says)."""
        if not text.strip():
            raise InvalidInput("message", ["text: must not be empty"])
        if len(text) > MAX_MESSAGE_CHARS:
            raise InvalidInput("message", [f"text: at most {MAX_MESSAGE_CHARS:,} characters, not {len(text):,}"])
        await self._signal(RunMessages.SEND_MESSAGE, text)

    async def ask(self, text: str, message_id: str | None = None, wait: bool = True) -> TurnAnswer:
        """A session's message; the answer of the turn that answers it (`wait=False`: at once, the
        turn to follow with `answer(message_id)`). The same `message_id` sent again is answered
        once (give your own to retry safely); reused for another text it is refused. Refused too:
        a closed session (naming how it ended), a run that is not a session, a message during a
        turn under the reject policy."""
        message_id = uuid.uuid4().hex if message_id is None else message_id
        request = _request("message", AskRequest, message_id=message_id, text=text, wait=wait)
        answer = await self._calls.session_update(RunMessages.ASK, request)
        return await self._followed(answer) if wait else answer

    async def answer(self, message_id: str) -> TurnAnswer:
        """The answer to an earlier `ask`, once its turn has ended."""
        request = _request("message id", FollowRequest, message_id=message_id)
        return await self._followed(await self._calls.session_update(RunMessages.ANSWER, request))

    async def _followed(self, answer: TurnAnswer) -> TurnAnswer:
        """A session that moved to a new build before the message's turn (`TurnAnswer.moved`) took
        the message along: its new run answers it."""
        request = FollowRequest(message_id=answer.message_id)
        loop = asyncio.get_running_loop()
        deadline, (pause, longest) = loop.time() + MOVE_WAIT_S, MOVE_PAUSE_S
        while answer.moved and loop.time() < deadline:
            await asyncio.sleep(pause)  # not at once: the old run answers `moved` again until it has gone
            pause = min(pause * 2, longest)
            try:
                answer = await self._calls.session_update(RunMessages.ANSWER, request)
            except MovedOn:  # reached the moving run as it closed: the next one has the message
                continue
        return answer

    async def close(self) -> str:
        """End a session once its turn in flight (and the messages queued before) are answered.
        Safe to send again (after a close whose answer was lost): a session that has ended DONE
        says so; one that ended otherwise (FAILED, cancelled, ...) refuses, naming how."""
        try:
            return await self._calls.session_update(RunMessages.CLOSE, None, str)
        except SessionEnded as closed:
            if closed.status != WorkflowExecutionStatus.COMPLETED.name or closed.phase != Phase.DONE:
                raise
            return f"session {self.workflow_id} has ended {ended(closed.phase, closed.status)}"

    async def pause(self) -> None:
        await self._signal(RunMessages.PAUSE)

    async def move(self) -> None:
        """A session between turns moves to its worker deployment's build now if that changed (it
        would at its next message anyway); any other run takes no notice."""
        await self._signal(RunMessages.MOVE)

    async def resume(self) -> None:
        await self._signal(RunMessages.RESUME)

    async def cancel(self) -> None:
        """The running step is cancelled and the run ends under its failure policy. RunClosed if
        the run has ended (the service would take the request and do nothing)."""
        await self._calls.running_or_closed("cancel")
        await self._calls.ask("cancel", self._calls.handle.cancel())

    async def terminate(self, reason: str) -> None:
        """End the run at once: no step boundary, no failure policy, no rollback (`cancel` does
        those). For runs that are stuck or no longer wanted at any price. RunClosed if it has ended."""
        await self._calls.running_or_closed("terminate")
        await self._calls.ask("terminate", self._calls.handle.terminate(reason=reason))

    def _by(self, by: str | None, principal: Principal | None) -> str:
        """Who a decision is recorded as made by: the principal, `by`, else the Temporal client's
        identity (`pid@host`); a signed decision is recorded as made by its signer."""
        return (principal.subject if principal else by or self._identity or "person")[:200]

    async def _signal(self, name: str, *args: Any) -> None:
        await self._calls.ask(name, self._calls.handle.signal(name, *args))


def _request(what: str, model: type[Request], **fields: Any) -> Request:
    """The request `model` of `fields`; InvalidInput (naming `what` and the field) if it is not one."""
    try:
        return model(**fields)
    except ValidationError as exc:
        raise InvalidInput.of(what, exc) from None
