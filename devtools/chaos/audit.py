"""The audit: what each run's history and state say happened, against the store outside Temporal.

For one run, the effects still on its stack (status DONE) must each be in the outside world
exactly once: a tracker row and an outbox row under the call's idempotency key, the file with the
bytes of the last write. Everything else under the run's keys or in its workspace is an extra
effect: a second execution of one call, or an effect the run says it undid or never made.

- missing_effects: an effect the history reports done that the store does not have, or a call
  that completed and then vanished from the run's accounts (neither on the stack nor undone).
- duplicate_effects: rows or files the history does not account for (a repeated call, an undo
  that did not happen, an effect the history never recorded).
- residue: temporary files left in a workspace.
- compensations_ok: runs that failed on purpose, whose rollback report is clean, whose effect
  stack ends exactly at the checkpoint they rolled back to, and whose world matches it.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from temporalio.api.enums.v1 import EventType

from devtools.chaos.scenarios import FAIL_ALL, ChaosRun
from devtools.chaos.stack import Stack, rows, tree
from ratchet.contracts import AgentState, EffectStatus, Phase

TMP_SUFFIX = ".ratchet-tmp"
_LABEL_KEY = re.compile(r"\(([^()]*)\)(?:: [^()]*)?$")
"""The key in a rollback report's label: `step 2 write_file (KEY)`, after a failover
`step 2 write_file (KEY): restored from cp-1 on host host-b` (workflows/saga.py)."""


@dataclass
class RunAudit:
    workflow_id: str
    kind: str
    phase: str | None = None
    completed: bool = False
    missing: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)
    residue: list[str] = field(default_factory=list)
    compensation_ok: bool | None = None
    task_failures: list[str] = field(default_factory=list)
    model_retries: int = 0
    note: str = ""

    @property
    def clean(self) -> bool:
        return (
            self.completed and not self.missing and not self.extra and not self.residue
            and self.compensation_ok is not False and not self.task_failures
        )


def audit_world(
    stack: Stack, workflow_id: str, workspace: str, state: AgentState, directory: Path | None = None
) -> RunAudit:
    """Compare the effects left on `state`'s stack with the tracker, the outbox and the files (of
    `directory`; default: the workspace on `stack`'s host)."""
    audit = RunAudit(workflow_id=workflow_id, kind="")
    files: dict[str, str] = {}
    keys: dict[str, set[str]] = {"create_ticket": set(), "outbox_send": set()}
    for effect in state.effects.stack.items:
        if effect.status != EffectStatus.DONE:
            continue
        if effect.tool == "write_file":
            files[effect.arguments["path"]] = effect.arguments["content"]
        elif effect.tool in keys:
            keys[effect.tool].add(effect.key)
    for tool, table in (("create_ticket", "tickets"), ("outbox_send", "outbox")):
        found = Counter(key for key, _, _ in rows(stack.tracker(), table, f"{workflow_id}/"))
        audit.missing += [f"{table} {key}" for key in sorted(keys[tool] - set(found))]
        audit.extra += [f"{table} {key} x{n}" for key, n in found.items() if key not in keys[tool]]
        audit.extra += [f"{table} {key} x{n}" for key, n in found.items() if key in keys[tool] and n > 1]
    actual = tree(directory if directory is not None else stack.workspace(workspace))
    audit.residue = [path for path in actual if path.endswith(TMP_SUFFIX)]
    for path, content in files.items():
        if actual.get(path) != content.encode():
            audit.missing.append(f"file {path}")
    audit.extra += [f"file {path}" for path in actual if path not in files and path not in audit.residue]
    audit.missing += [f"record {key}: done, then neither on the stack nor undone" for key in _unaccounted(state)]
    return audit


def _unaccounted(state: AgentState) -> list[str]:
    """Keys of side-effecting calls that completed but are neither on the effect stack nor named
    by a rollback report: the history lost track of an effect."""
    accounted = {e.key for e in state.effects.stack.items}
    for report in state.effects.rollbacks:
        for label in report.undone + report.irreversible + report.not_undone:
            found = _LABEL_KEY.search(label)
            accounted.add(found.group(1) if found else label)
    side_effects = {"write_file", "create_ticket", "outbox_send"}
    return [r.key for r in state.calls.tool_calls.items if r.tool in side_effects and r.result.ok and r.key not in accounted]


def audit_run(
    stack: Stack, run: ChaosRun, state: AgentState | None, history: object | None, directory: Path | None = None
) -> RunAudit:
    if state is None:
        return RunAudit(run.workflow_id, run.kind, note="no state: the run is lost")
    audit = audit_world(stack, run.workflow_id, run.input["workspace"], state, directory)
    audit.kind, audit.phase = run.kind, str(state.phase)
    audit.completed = state.phase == run.expect
    if run.compensates:
        audit.compensation_ok = _compensated(run, state) and not audit.missing and not audit.extra
    if history is not None:
        audit.task_failures, audit.model_retries = _from_history(history)
    return audit


def _compensated(run: ChaosRun, state: AgentState) -> bool:
    if state.phase != Phase.FAILED or not state.effects.rollbacks:
        return False
    report = state.effects.rollbacks[-1]
    if not report.clean or not report.undone:
        return False
    last = state.effects.checkpoints.items[-1] if state.effects.checkpoints.items and run.kind != FAIL_ALL else None
    target, boundary = (last.id, last.effects_len) if last else (None, 0)
    return report.checkpoint_id == target and len(state.effects.stack.items) == boundary


def _from_history(history) -> tuple[list[str], int]:
    """WorkflowTaskFailed messages, and how many model.call attempts were retries."""
    failures, retries, model_calls = [], 0, set()
    for event in history.events:
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
            failures.append(event.workflow_task_failed_event_attributes.failure.message)
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            if event.activity_task_scheduled_event_attributes.activity_type.name == "model.call":
                model_calls.add(event.event_id)
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            attrs = event.activity_task_started_event_attributes
            if attrs.scheduled_event_id in model_calls:
                retries += attrs.attempt - 1
    return failures, retries


@dataclass
class Figures:
    runs: int = 0
    completed: int = 0
    lost: int = 0
    duplicate_effects: int = 0
    missing_effects: int = 0
    compensations: int = 0
    compensations_ok: int = 0
    residue: int = 0
    task_failures: int = 0
    model_retries: int = 0
    model_faults: int = 0
    kills: int = 0
    restarted_calls: int = 0
    """Tool calls and undos a retry found STARTED in the ledger (the crash window was hit)."""
    server_restarts: int = 0
    elapsed_s: float = 0.0
    expected_runs: int = 0

    @classmethod
    def of(cls, audits: list[RunAudit], expected_runs: int) -> Figures:
        fig = cls(runs=len(audits), expected_runs=expected_runs)
        for a in audits:
            fig.completed += a.completed
            fig.lost += a.phase is None or (not a.completed and a.phase not in _TERMINAL)
            fig.duplicate_effects += len(a.extra)
            fig.missing_effects += len(a.missing)
            fig.residue += len(a.residue)
            fig.task_failures += len(a.task_failures)
            fig.model_retries += a.model_retries
            if a.compensation_ok is not None:
                fig.compensations += 1
                fig.compensations_ok += a.compensation_ok
        return fig

    @property
    def ok(self) -> bool:
        return (
            self.runs == self.expected_runs and self.completed == self.runs and self.lost == 0
            and self.duplicate_effects == 0 and self.missing_effects == 0 and self.residue == 0
            and self.compensations_ok == self.compensations and self.task_failures == 0
        )

    def line(self) -> str:
        return (
            f"runs={self.runs} completed={self.completed} lost={self.lost} "
            f"duplicate_effects={self.duplicate_effects} missing_effects={self.missing_effects} "
            f"compensations_ok={self.compensations_ok}/{self.compensations} residue={self.residue} "
            f"task_failures={self.task_failures} model_retries={self.model_retries} model_faults={self.model_faults} "
            f"worker_kills={self.kills} restarted_calls={self.restarted_calls} "
            f"server_restarts={self.server_restarts} elapsed_s={self.elapsed_s:.0f}"
        )


_TERMINAL = {str(p) for p in Phase if p.terminal}
