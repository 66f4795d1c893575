"""What the Temporal Web UI and `temporal workflow describe` show as the run's current details
(`workflow.set_current_details`): what the run waits for, in a person's terms, with the exact
command that answers it, and its last checkpoint with the evidence line. A pure function of the
state, set by the run's stream as the state changes (workflows/events.py); nothing of it goes into
history, so replay is unaffected."""

from __future__ import annotations

import json

from ratchet.contracts import AgentState, Phase
from ratchet.contracts.payloads import Evidence

MAX_ARGUMENTS = 300
RECENT_DECISIONS = 5


def current_details(state: AgentState) -> str:
    """Markdown: the phase and step, every call waiting for a person, the last checkpoint."""
    lines = [f"**{state.phase.value}** at step {state.step}"]
    wid = state.workflow_id
    for approval in state.calls.pending_approvals:
        lines += [
            "",
            f"Waiting for approval: `{approval.tool}` ({approval.reason})",
            f"arguments: `{_arguments(approval.arguments)}`",
            f"`ratchet approve {wid} {approval.call_id}` or `ratchet reject {wid} {approval.call_id} --reason ...`",
        ]
    for decision in state.calls.pending_decisions:
        lines += [
            "",
            f"Outcome unknown: `{decision.tool}` ({decision.error})",
            f"arguments: `{_arguments(decision.arguments)}`",
            f"`ratchet decide {wid} {decision.call_id} retry|assume_done|skip|fail`",
        ]
    handed = state.handoffs[-1] if state.handoffs and state.handoffs[-1].waiting else None
    if handed is not None:
        lines += [
            "",
            f"Handed to `{handed.to_agent}` by {handed.from_agent} at step {handed.step}: {handed.summary}",
            *[f"open question: {q}" for q in handed.open_questions],
            f"`ratchet respond {wid} --finish '...'` or `--reply '...'`"
            f" or `--hand-back {handed.from_agent} --notes '...'`",
        ]
    lines += _decided(state)
    if state.phase == Phase.AWAITING_MESSAGE:
        lines += ["", f"Waiting for the next message: `ratchet ask {wid} '...'`"]
    if state.effects.checkpoints.items:
        last = state.effects.checkpoints.items[-1]
        lines += ["", f"Last checkpoint {last.id} (step {last.step}): {evidence_line(last.evidence)}"]
    return "\n".join(lines)


def _decided(state: AgentState) -> list[str]:
    """The latest decisions: who (subject, issuer, role, or unsigned `by`), when, the digest bound."""
    latest = list(state.calls.decisions.items())[-RECENT_DECISIONS:]
    lines = ["", "Decisions:"] if latest else []
    for call_id, d in latest:
        who = f"{d.subject} ({d.issuer}, role {d.role}), signed" if d.subject else f"{d.by}, unsigned"
        digest = f" digest `{d.digest[:19]}…`" if d.digest else ""
        lines.append(f"- `{call_id}` {'approved' if d.approved else 'rejected'} by {who} at {d.at}{digest}")
    return lines


def _arguments(arguments: dict) -> str:
    text = json.dumps(arguments, ensure_ascii=False, sort_keys=True).replace("`", "'")
    return text if len(text) <= MAX_ARGUMENTS else text[: MAX_ARGUMENTS - 1] + "…"


def evidence_line(evidence: Evidence | None) -> str:
    """`pytest -q -> exit 0, 12 tests` (what `ratchet checkpoints` shows)."""
    if evidence is None:
        return "no verifier"
    line = f"{' '.join(evidence.argv)} -> exit {evidence.exit_code}"
    if evidence.no_tests:
        return line + ", no test ran: unverified"
    if evidence.tests_run is not None:
        line += f", {evidence.tests_run} tests"
    if evidence.tests_failed:
        line += f", {evidence.tests_failed} failed"
    return line
