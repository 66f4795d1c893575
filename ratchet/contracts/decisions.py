"""Signed decisions: what a person's signature covers (`DecisionClaim`), the proof a decision request
carries (`DecisionProof`), the profile's rules for them (`SignedDecisions`), and the canonical bytes
and digests both sides compute the same way (pure: the client signs them, the workflow checks them,
`ratchet audit --verify` checks them again)."""

from __future__ import annotations

import hashlib
import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

ANY_TOOL = "*"
"""The `approvers` key whose roles may decide on a tool the map does not name."""
ROLLBACK = "rollback"
"""The `approvers` key of a running run's rollback (else `*`), and the `tool` its digest names."""


class DecisionClaim(BaseModel):
    """What a signature covers: this decision, on this call of this run, with these arguments, by
    this person with these roles, valid from `issued_at` until `expires_at` (ISO 8601, with a zone)."""

    run_id: str = Field(min_length=1, max_length=200)
    """The run's workflow id (the same across continue-as-new)."""
    call_id: str = Field(min_length=1, max_length=200)
    digest: str = Field(min_length=1, max_length=100)
    """`call_digest` of the call: its tool, the tool's schema and its arguments."""
    decision: str = Field(min_length=1, max_length=300)
    """`approve`, `reject`, `decide:<choice>` (`decision_value`)."""
    subject: str = Field(min_length=1, max_length=200)
    issuer: str = Field(min_length=1, max_length=200)
    roles: list[Annotated[str, Field(min_length=1, max_length=100)]] = Field(min_length=1, max_length=50)
    """The signer's roles (as their identity provider or Ratchet's users table says): the decision
    is taken in the first the profile allows for the tool (`acting_role`)."""
    issued_at: str = Field(min_length=1, max_length=40)
    expires_at: str = Field(min_length=1, max_length=40)


class DecisionProof(BaseModel):
    """A claim signed with the Ed25519 key `key_id` (whose public half the workers know:
    RATCHET_APPROVER_KEYS); `signature` is base64 over `canonical_bytes(claim)`."""

    claim: DecisionClaim
    key_id: str = Field(min_length=1, max_length=100)
    signature: str = Field(min_length=1, max_length=200)


class SignedDecisions(BaseModel):
    """A profile's `approvals:` setting: whether decisions must carry a proof."""

    signed: Literal["required", "optional"] = "optional"
    """`required`: an approve, reject or decide without a valid proof is refused. `optional`: an
    unsigned one is taken as before (recorded as unsigned); a proof sent is checked all the same."""


def canonical_json(value: Any) -> bytes:
    """The one serialisation signed and digested: sorted keys, no spaces, UTF-8."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def canonical_bytes(claim: DecisionClaim) -> bytes:
    return canonical_json(claim.model_dump(mode="json"))


def schema_digest(schema: dict[str, Any]) -> str:
    """The digest of a tool's schema as the model was told of it (`ToolSchema`, dumped)."""
    return "sha256:" + hashlib.sha256(canonical_json(schema)).hexdigest()


def call_digest(tool: str, schema: str | None, arguments: dict[str, Any]) -> str:
    """The digest a decision is bound to: the tool, its schema's digest and the call's arguments."""
    body = {"tool": tool, "schema": schema or "", "arguments": arguments}
    return "sha256:" + hashlib.sha256(canonical_json(body)).hexdigest()


def decision_value(kind: Literal["approve", "reject", "decide", "rollback"], choice: str | None = None) -> str:
    """The `decision` a claim names: `approve`, `reject`, `decide:retry`, `rollback:cp-3`, ..."""
    return f"{kind}:{choice}" if kind in ("decide", ROLLBACK) else kind


def approve_value(grant: BaseModel | None) -> str:
    """An approval's `decision`: `approve`, or with a grant `approve+grant:<digest of the grant>`, so a
    signed approval cannot carry a grant (its tools, patterns, duration) its signer did not sign."""
    if grant is None:
        return "approve"
    return "approve+grant:sha256:" + hashlib.sha256(canonical_json(grant.model_dump(mode="json"))).hexdigest()


def rollback_digest(checkpoint_id: str, then: str) -> str:
    """What a rollback's proof is bound to (its `call_id` is the checkpoint): the target and what follows."""
    return call_digest(ROLLBACK, None, {"checkpoint_id": checkpoint_id, "then": then})


def allowed_roles(approvers: dict[str, list[str]], tool: str) -> list[str] | None:
    """The roles that may decide on `tool` (the tool's entry, else `*`); None: any role may."""
    if not approvers:
        return None
    return approvers.get(tool, approvers.get(ANY_TOOL, []))


def acting_role(approvers: dict[str, list[str]], tool: str, roles: list[str]) -> str | None:
    """The role of `roles` a decision on `tool` is taken in: the first the profile allows (any role
    when it names none); None: no role of them may decide on it."""
    allowed = allowed_roles(approvers, tool)
    return next((r for r in roles if allowed is None or r in allowed), None)
