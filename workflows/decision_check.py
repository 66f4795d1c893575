"""The check of a decision's proof in the `approve`, `reject` and `decide` validators (deterministic,
no I/O: the keys, the profile's rules and the allowed skew are in the plan, the time is the
workflow's). A refused request raises ValueError naming why; the update is rejected and nothing
changes. What an accepted proof adds to the recorded decision: `signed`."""

from __future__ import annotations

from typing import Any

from temporalio import workflow

from ratchet.contracts import RunPlan
from ratchet.contracts.decisions import DecisionProof, acting_role, allowed_roles
from ratchet.core import decision_proof

REQUIRED = "required"


def check(
    plan: RunPlan,
    workflow_id: str,
    call_id: str,
    tool: str,
    digest: str,
    decision: str,
    proof: DecisionProof | None,
) -> None:
    """Refuse (ValueError) a decision whose proof does not hold for this call, or that has none
    where the profile requires one."""
    if proof is None:
        if plan.approvals.signed == REQUIRED:
            raise ValueError(
                f"unsigned decision refused: profile {plan.agent!r} requires signed decisions "
                "(approvals: {signed: required}); sign it with a key the workers know (RATCHET_SIGNING_KEY)"
            )
        return
    claim = proof.claim
    expected = {"run_id": workflow_id, "call_id": call_id, "decision": decision}
    for field, value in expected.items():
        if getattr(claim, field) != value:
            raise ValueError(f"proof refused: it is for {field} {getattr(claim, field)!r}, not {value!r}")
    if claim.digest != digest:
        raise ValueError(
            f"proof refused: it was signed for other arguments of {tool} (digest {claim.digest[:19]}..., "
            f"the call's is {digest[:19]}...); decide on the call as it is now"
        )
    problem = decision_proof.problem(proof, plan.approver_keys, workflow.now(), plan.decision_leeway_s)
    if problem is not None:
        raise ValueError(f"proof refused: {problem}")
    if acting_role(plan.approvers, tool, claim.roles) is None:
        allowed = allowed_roles(plan.approvers, tool) or []
        raise ValueError(
            f"proof refused: {claim.subject} ({claim.issuer}) has roles {', '.join(claim.roles)}; "
            f"{tool} may be decided on by: {', '.join(allowed) or 'nobody'}"
        )


def signed(plan: RunPlan, tool: str, proof: DecisionProof | None, by: str) -> dict[str, Any]:
    """The recorded decision's fields of who made it: the signer's (`by` is their subject, `role`
    the one they decided in) or just `by`."""
    if proof is None:
        return {"by": by}
    claim = proof.claim
    role = acting_role(plan.approvers, tool, claim.roles)
    return {"by": claim.subject, "subject": claim.subject, "issuer": claim.issuer, "role": role, "proof": proof}
