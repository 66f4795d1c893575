"""The proof a decision request carries (docs/SECURITY.md, "Signed decisions"): the claim of who
decides, in which role, on which call with which arguments, until when, signed with this client's
key (RATCHET_SIGNING_KEY). The call's digest is computed here from the arguments as the run shows
them (or taken from the page the person decided on), so a proof never covers arguments nobody saw."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from ratchet.client.errors import InvalidInput
from ratchet.contracts import AgentState
from ratchet.contracts.decisions import DecisionClaim, DecisionProof, allowed_roles, call_digest
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
        """The proof for `decision` on `call_id`, or None when the call waits for nothing (the run
        then answers why: decided already, by whom and when). `digest`: the one the person saw."""
        state = await self._state()
        waiting = _waiting(state, call_id)
        if waiting is None or state.plan is None:
            return None
        tool, arguments = waiting
        spec = state.plan.tool(tool)
        digest = digest or call_digest(tool, spec.schema_digest if spec else None, arguments)
        now = datetime.now(UTC)
        claim = DecisionClaim(
            run_id=workflow_id,
            call_id=call_id,
            digest=digest,
            decision=decision,
            subject=principal.subject,
            issuer=principal.issuer,
            role=role_for(principal, allowed_roles(state.plan.approvers, tool)),
            issued_at=now.isoformat(),
            expires_at=(now + timedelta(seconds=self.ttl_s)).isoformat(),
        )
        return self.signer.sign(claim)


def role_for(principal: Principal, allowed: list[str] | None) -> str:
    """The principal's role the claim names: the first the tool allows, else their first (the run
    then refuses it, naming the roles it allows)."""
    if not principal.roles:
        raise InvalidInput("decision", [f"principal {principal.subject!r} has no role to decide in"])
    if allowed is None:
        return principal.roles[0]
    return next((r for r in principal.roles if r in allowed), principal.roles[0])


def _waiting(state: AgentState, call_id: str) -> tuple[str, dict[str, Any]] | None:
    """The tool and arguments of the call `call_id` that waits for an approval or a decision."""
    calls = state.calls
    waiting = [(p.call_id, p.tool, p.arguments) for p in calls.pending_approvals]
    waiting += [(p.call_id, p.tool, p.arguments) for p in calls.pending_decisions]
    return next(((tool, arguments) for cid, tool, arguments in waiting if cid == call_id), None)
