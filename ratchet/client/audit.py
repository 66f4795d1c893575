"""A run's decisions as its history recorded them (`ratchet audit`): every accepted approve, reject
and decide update, with its proof, read from the history of each execution of the run (continue-as-
new included), and checked again: the signature under the auditor's keys (RATCHET_APPROVER_KEYS),
the claim against the request (run, call, decision), its time window at the moment the run accepted
it, and its digest against the arguments the call was scheduled with in the history."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ValidationError
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import WorkflowHistory
from temporalio.converter import DataConverter

from ratchet.contracts import ApproveRequest, DecideRequest, RejectRequest, RollbackRequest, RunMessages, ToolInvocation
from ratchet.contracts.decisions import DecisionProof, call_digest, decision_value, rollback_digest
from ratchet.core import decision_proof

Kind = Literal["approve", "reject", "decide", "rollback"]
DECISIONS: dict[str, tuple[type[BaseModel], Kind]] = {
    RunMessages.APPROVE: (ApproveRequest, "approve"),
    RunMessages.REJECT: (RejectRequest, "reject"),
    RunMessages.DECIDE: (DecideRequest, "decide"),
    RunMessages.ROLLBACK: (RollbackRequest, "rollback"),
}
"""The updates that decide, with the request each takes and the kind of decision its claim names."""
TOOL_ACTIVITIES = ("tool.", "mcp.")


class AuditEntry(BaseModel):
    """One decision as the run accepted it, and what checking it again found."""

    run_id: str
    execution: str
    """The Temporal run id of the execution that accepted it."""
    event_id: int
    accepted_at: str
    update: str
    call_id: str
    decision: str
    by: str
    subject: str | None = None
    issuer: str | None = None
    roles: list[str] = []
    """The signer's roles as the proof names them."""
    digest: str | None = None
    then: str | None = None
    """A rollback's: what follows it (its proof covers it)."""
    proof: DecisionProof | None = None
    verified: bool | None = None
    """True: signature, claim and digest check out; False: see `problems`; None: unsigned."""
    digest_checked: bool = False
    """The digest was compared with the arguments the call was scheduled with (not for a call that
    did not run as an activity: a rejected one, a local activity, a timer)."""
    problems: list[str] = []


class Audit:
    """Reads and checks the decisions of `workflow_id`'s executions (oldest first)."""

    def __init__(
        self, converter: DataConverter, workflow_id: str, keys: dict[str, str], schemas: dict[str, str | None]
    ) -> None:
        self.converter, self.workflow_id, self.keys, self.schemas = converter, workflow_id, keys, schemas

    async def entries(self, executions: list[WorkflowHistory], leeway_s: float) -> list[AuditEntry]:
        out: list[AuditEntry] = []
        for history in executions:
            events = list(history.events)
            execution = history.run_id
            for index, event in enumerate(events):
                if event.event_type != EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
                    continue
                entry = await self._entry(event, execution)
                if entry is not None:
                    await self._check(entry, events[index + 1 :], leeway_s)
                    out.append(entry)
        return out

    async def _entry(self, event: HistoryEvent, execution: str) -> AuditEntry | None:
        update = event.workflow_execution_update_accepted_event_attributes.accepted_request.input
        if update.name not in DECISIONS:
            return None
        model, kind = DECISIONS[update.name]
        [raw] = await self.converter.decode(list(update.args.payloads)[:1], [dict])
        try:
            request: Any = model.model_validate(raw)
        except ValidationError as exc:
            raise ValueError(f"event {event.event_id}: not a {update.name} request: {exc}") from None
        target = request.checkpoint_id if update.name == RunMessages.ROLLBACK else getattr(request, "choice", None)
        proof: DecisionProof | None = request.proof
        claim = proof.claim if proof else None
        return AuditEntry(
            run_id=self.workflow_id,
            execution=execution,
            event_id=event.event_id,
            accepted_at=event.event_time.ToDatetime().isoformat() + "Z",
            update=update.name,
            call_id=getattr(request, "call_id", None) or request.checkpoint_id,
            decision=decision_value(kind, target),
            by=claim.subject if claim else getattr(request, "by", ""),
            then=getattr(request, "then", None),
            subject=claim.subject if claim else None,
            issuer=claim.issuer if claim else None,
            roles=claim.roles if claim else [],
            digest=claim.digest if claim else None,
            proof=proof,
        )

    async def _check(self, entry: AuditEntry, after: list[HistoryEvent], leeway_s: float) -> None:
        proof = entry.proof
        if proof is None:
            return
        claim, problems = proof.claim, entry.problems
        for field, value in {"run_id": entry.run_id, "call_id": entry.call_id, "decision": entry.decision}.items():
            if getattr(claim, field) != value:
                problems.append(f"the proof is for {field} {getattr(claim, field)!r}, the request's is {value!r}")
        accepted = datetime.fromisoformat(entry.accepted_at.replace("Z", "+00:00"))
        problem = decision_proof.problem(proof, self.keys, accepted, leeway_s)
        if problem is not None:
            problems.append(problem)
        if entry.update == RunMessages.ROLLBACK:
            if rollback_digest(entry.call_id, entry.then or "") != claim.digest:
                problems.append("the proof covers another rollback than the one requested (digest mismatch)")
            entry.digest_checked, entry.verified = True, not problems
            return
        ran = await self._scheduled(entry.call_id, after)
        if ran is not None:
            entry.digest_checked = True
            tool, arguments = ran
            if call_digest(tool, self.schemas.get(tool), arguments) != claim.digest:
                problems.append(f"{tool} was scheduled with other arguments than the proof covers (digest mismatch)")
        entry.verified = not problems

    async def _scheduled(self, call_id: str, events: list[HistoryEvent]) -> tuple[str, dict[str, Any]] | None:
        """The tool and arguments of the first activity of `call_id` scheduled after the decision."""
        for event in events:
            if event.event_type != EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
                continue
            attrs = event.activity_task_scheduled_event_attributes
            if not attrs.activity_type.name.startswith(TOOL_ACTIVITIES):
                continue
            [raw] = await self.converter.decode(list(attrs.input.payloads)[:1], [dict])
            invocation = ToolInvocation.model_validate(raw)
            if invocation.call_id == call_id:
                tool = invocation.tool or attrs.activity_type.name.removeprefix("tool.")
                return tool, invocation.arguments
        return None


async def executions(fetch: Callable[[str | None], Awaitable[WorkflowHistory]]) -> list[WorkflowHistory]:
    """The histories of a run's executions, oldest first: the latest (`fetch(None)`), then each one
    it continued from (`fetch(run_id)`)."""
    chain = [await fetch(None)]
    while True:
        first = next(iter(chain[0].events), None)
        before = first.workflow_execution_started_event_attributes.continued_execution_run_id if first else ""
        if not before:
            return chain
        chain.insert(0, await fetch(before))


def json_lines(entries: list[AuditEntry]) -> str:
    return "".join(json.dumps(e.model_dump(mode="json"), ensure_ascii=False) + "\n" for e in entries)
