"""The data that crosses Temporal boundaries, by audience:

- `run`: what a user sends (the workflow input `AgentRun`, update and query inputs);
- `plan`: a run resolved against the worker's profiles (`RunPlan`, `RunPolicy`, tool specs);
- `payloads`: activity inputs and outputs (model and tool calls, undo, verification);
- `sandbox`: what a run's programs may do (`SandboxPolicy`);
- `state`: the agent's state (`AgentState`), effects, checkpoints, the handover and the result;
- `rollback`: the rollback of a closed run (`RollbackWorkflow`'s input and result);
- `outcomes`: decisions on calls whose outcome is unknown (`DecideRequest`);
- `base`: the vocabulary they share.

Every name is re-exported here; import from `ratchet.contracts`. Only pydantic and the standard
library are imported, so workflow code can use them.
"""

from ratchet.contracts.base import (
    problems,
    ErrorType, NAME_PATTERN, MAX_OBJECTIVE_CHARS, valid_unicode, scrub_text, Strict, Phase, TERMINAL_PHASES, EffectClass, FailurePolicy, ArtifactRef,
)
from ratchet.contracts.run import (
    AGENT_WORKFLOW, STATE_QUERY, RunMessages, ScriptedToolCall, ScriptedReply, ModelOverride, BudgetOverride, ResumeFrom, AgentRun, RollbackRequest, ApproveRequest, RejectRequest, TranscriptPage,
)
from ratchet.contracts.sandbox import SandboxPolicy
from ratchet.contracts.plan import (
    Budget, ModelSettings, ApprovalRule, ToolSpec, Verifier, RunPolicy, RunPlan, ModelCallConfig, PlanRun, PrepareRun,
)
from ratchet.contracts.payloads import (
    ToolCallRequest, Message, Usage, ModelRequest, ModelReply, ToolInvocation, ToolResult, UndoInvocation, Evidence, VerifyRequest, VerifyResult, LoadCheckpoint, OpenWorkspace, RehydrateWorkspace, WorkspaceBinding,
)
from ratchet.contracts.outcomes import OutcomeChoice, DecideRequest, PendingDecision, OutcomeDecision
from ratchet.contracts.state import (
    UNDO_DESCRIPTION, ToolCallRecord, EffectStatus, Effect, Checkpoint, Forked, Failover, RollbackReport, RollbackPlanItem, PendingApproval, Decision, Transcript, BudgetUsed, AgentState, ArchiveEffects, TranscriptSlice, Continuation, AgentResult,
)
from ratchet.contracts.rollback import (
    ROLLBACK_WORKFLOW, TO_START, rollback_id, RollbackRun, LoadClosedRun, ClosedRun, ClosedRollback,
)

__all__ = [
    "problems",
    "AGENT_WORKFLOW",
    "STATE_QUERY",
    "RunMessages",
    "ErrorType",
    "NAME_PATTERN",
    "MAX_OBJECTIVE_CHARS",
    "valid_unicode",
    "scrub_text",
    "Strict",
    "Phase",
    "TERMINAL_PHASES",
    "EffectClass",
    "FailurePolicy",
    "ArtifactRef",
    "ScriptedToolCall",
    "ScriptedReply",
    "ModelOverride",
    "BudgetOverride",
    "ResumeFrom",
    "AgentRun",
    "RollbackRequest",
    "ApproveRequest",
    "RejectRequest",
    "TranscriptPage",
    "Budget",
    "ModelSettings",
    "ApprovalRule",
    "ToolSpec",
    "Verifier",
    "SandboxPolicy",
    "RunPolicy",
    "RunPlan",
    "ModelCallConfig",
    "PlanRun",
    "PrepareRun",
    "ToolCallRequest",
    "Message",
    "Usage",
    "ModelRequest",
    "ModelReply",
    "ToolInvocation",
    "ToolResult",
    "UndoInvocation",
    "Evidence",
    "VerifyRequest",
    "VerifyResult",
    "LoadCheckpoint",
    "OpenWorkspace",
    "RehydrateWorkspace",
    "WorkspaceBinding",
    "UNDO_DESCRIPTION",
    "ToolCallRecord",
    "EffectStatus",
    "Effect",
    "Checkpoint",
    "Forked",
    "Failover",
    "RollbackReport",
    "RollbackPlanItem",
    "PendingApproval",
    "Decision",
    "Transcript",
    "BudgetUsed",
    "AgentState",
    "ArchiveEffects",
    "TranscriptSlice",
    "Continuation",
    "AgentResult",
    "OutcomeChoice",
    "DecideRequest",
    "PendingDecision",
    "OutcomeDecision",
    "ROLLBACK_WORKFLOW",
    "TO_START",
    "rollback_id",
    "RollbackRun",
    "LoadClosedRun",
    "ClosedRun",
    "ClosedRollback",
]
