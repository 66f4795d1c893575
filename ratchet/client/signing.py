"""The proof a decision request carries (docs/SECURITY.md, "Signed decisions"): the claim of who
decides, in which role, on which call with which arguments, until when, signed with this client's
key (RATCHET_SIGNING_KEY). The call's digest is computed here from the arguments as the run shows
them (or taken from the page the person decided on), so a proof never covers arguments nobody saw."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from ratchet.client.errors import InvalidInput
from ratchet.contracts import AgentState
from ratchet.contracts.decisions import DecisionClaim, DecisionProof, call_digest
from ratchet.contracts.identity import Principal
from ratchet.core.decision_proof import Signer


class DecisionSigner:
    """Signs the decisions of a client whose settings name a signing key; `state` reads the run."""

    def __init__(
        self,
        signer: Signer,
        ttl_s: float,
        state: Callable[[], Awaitable[AgentState]],
        default_principal: Callable[[str], Principal],
    ) -> None:
        self.signer, self.ttl_s, self._state = signer, ttl_s, state
        self.default_principal = default_principal
        """Who decides when the caller names nobody: the CLI's person (RATCHET_SUBJECT, RATCHET_ROLES)."""

    async def proof(
        self, workflow_id: str, call_id: str, decision: str, principal: Principal, digest: str | None = None
    ) -> DecisionProof | None:
        """The proof for `decision` on `call_id`. `digest`: the call's as the person saw it (the
        console's page has it); None: computed from the run's state, and None returned when the call
        waits for nothing (the run then answers why: decided already, by whom and when)."""
        if not principal.roles:
            raise InvalidInput("decision", [f"principal {principal.subject!r} has no role to decide in"])
        digest = digest or await self._digest(call_id)
        if digest is None:
            return None
        now = datetime.now(UTC)
        claim = DecisionClaim(
            run_id=workflow_id,
            call_id=call_id,
            digest=digest,
            decision=decision,
            subject=principal.subject,
            issuer=principal.issuer,
            roles=principal.roles,
            issued_at=now.isoformat(),
            expires_at=(now + timedelta(seconds=self.ttl_s)).isoformat(),
        )
        return self.signer.sign(claim)

    async def _digest(self, call_id: str) -> str | None:
        """The digest of the call `call_id` waiting for a decision, from its tool, the tool's schema
        and its arguments as the run shows them; None if it waits for nothing."""
        state = await self._state()
        calls = state.calls
        waiting = [(p.call_id, p.tool, p.arguments) for p in calls.pending_approvals]
        waiting += [(p.call_id, p.tool, p.arguments) for p in calls.pending_decisions]
        found = next(((tool, arguments) for cid, tool, arguments in waiting if cid == call_id), None)
        if found is None or state.plan is None:
            return None
        spec = state.plan.tool(found[0])
        return call_digest(found[0], spec.schema_digest if spec else None, found[1])
