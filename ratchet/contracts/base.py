"""Shared vocabulary of every contract: names, phases, effect classes, artifact references.

Only pydantic and the standard library are imported in ratchet.contracts, so workflow code can
import it without dragging in openai, httpx, sqlite3 or the filesystem.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError


NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$"


MAX_OBJECTIVE_CHARS = 200_000


def valid_unicode(text: str) -> bool:
    """False for strings JSON can carry but UTF-8 cannot (lone surrogates such as "\\ud800")."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def scrub_text(text: str) -> str:
    """NUL characters dropped and lone surrogates replaced, so the text always serializes."""
    return text.replace("\x00", "").encode("utf-8", "replace").decode("utf-8")


BY_TIMEOUT = "timeout"
"""The `by` of a decision the run made itself when nobody decided in time."""


BY_RULE, BY_GRANT = "rule:", "grant:"
"""The `by` prefixes of a decision a profile rule or a grant made (workflows/grants.py)."""


def _a_person(value: str) -> str:
    if value == BY_TIMEOUT:
        raise ValueError(f"{BY_TIMEOUT!r} is the run's own name for a decision nobody made in time")
    if value.startswith((BY_RULE, BY_GRANT)):
        raise ValueError(f"{value!r}: names starting {BY_RULE!r} or {BY_GRANT!r} are the run's own (its policies)")
    return value


Decider = Annotated[str, Field(min_length=1, max_length=200), AfterValidator(_a_person)]
"""Who decides, as a request names them (`ratchet.client` sends its Temporal identity, `pid@host`)."""


class Strict(BaseModel):
    """Input a person types: unknown fields are mistakes, not extensions."""

    model_config = ConfigDict(extra="forbid")


class Phase(StrEnum):
    STARTING = "STARTING"
    THINKING = "THINKING"
    ACTING = "ACTING"
    AWAITING_APPROVAL = "AWAITING_APPROVAL"
    AWAITING_DECISION = "AWAITING_DECISION"
    AWAITING_MESSAGE = "AWAITING_MESSAGE"
    """A session between turns: it waits for the next message (workflows/sessions.py)."""
    """A call's outcome is unknown; a person or the profile's timeout policy decides (`decide`)."""
    AWAITING_PERSON = "AWAITING_PERSON"
    """Handed to a person's inbox (ratchet/contracts/handoff.py): parked until they `respond`."""
    PAUSED = "PAUSED"
    ROLLING_BACK = "ROLLING_BACK"
    DONE = "DONE"
    FAILED = "FAILED"
    BUDGET_EXHAUSTED = "BUDGET_EXHAUSTED"
    CANCELLED = "CANCELLED"
    ROLLED_BACK = "ROLLED_BACK"
    COMPENSATION_FAILED = "COMPENSATION_FAILED"

    @property
    def terminal(self) -> bool:
        return self in TERMINAL_PHASES


TERMINAL_PHASES = frozenset(
    {
        Phase.DONE,
        Phase.FAILED,
        Phase.BUDGET_EXHAUSTED,
        Phase.CANCELLED,
        Phase.ROLLED_BACK,
        Phase.COMPENSATION_FAILED,
    }
)


class EffectClass(StrEnum):
    READ_ONLY = "read_only"
    COMPENSABLE = "compensable"
    IRREVERSIBLE = "irreversible"


class ErrorType(StrEnum):
    """The `ApplicationError.type` of a run's failures and the `ToolResult.error_type` of a tool
    call that went back to the model: what an operator or a model sees and can match on."""

    INVALID_INPUT = "InvalidInput"
    """The start cannot be accepted (input, profile or fork source): non-retryable, names the field."""
    INVALID_PROFILE = "InvalidProfile"
    """The worker's profile is broken (names a tool the worker lacks, a window under 2)."""
    INVALID_ARGUMENTS = "InvalidArguments"
    """A tool call the model made wrong (bad JSON, unknown tool, failed validation): back to the model."""
    AGENT_FAILED = "AgentFailed"
    """The run failed after its failure policy was applied."""
    REJECTED = "Rejected"
    """A person rejected the tool call; the reason goes to the model."""
    SUB_AGENT_FAILED = "SubAgentFailed"
    TOOL_ERROR = "ToolError"
    """A tool reported an error for the model to handle."""
    FATAL_TOOL_ERROR = "FatalToolError"
    """A tool failed in a way the model cannot fix: the run fails."""
    UNDO_FAILED = "UndoFailed"
    OUTCOME_UNKNOWN = "OutcomeUnknown"
    """A side effect was started and its outcome cannot be known (docs/RELIABILITY.md): the run
    asks for a decision (`AWAITING_DECISION`)."""
    NOT_STARTED = "NotStarted"
    """A tool said it failed before it acted (`ratchet.core.tools.NotStarted`): an ordinary retry."""
    SKIPPED = "Skipped"
    """A person (or the decision timeout policy) skipped a call whose outcome is unknown."""
    BUDGET_EXHAUSTED = "BudgetExhausted"
    """The next model call cannot fit in what is left of the run's token or cost budget: the run
    ends BUDGET_EXHAUSTED before making it."""
    GUARDRAIL_TRIPPED = "GuardrailTripped"
    """A guardrail whose action is `stop` matched (`state.guardrails` says which, where, what kind):
    the run failed after its failure policy."""
    INTERRUPTED = "Interrupted"
    """A tool call the run stopped before it finished (a pause, a rollback, the deadline)."""
    NOT_ON_THIS_HOST = "NotOnThisHost"
    """A workspace tool tried as a local activity on a worker whose host does not hold the run's
    workspace: it did not act; the call goes to the workspace's host queue instead."""
    QUARANTINED = "Quarantined"
    """A shadow run's call of a tool that does not run in a shadow, which the original never made:
    not executed (ratchet/contracts/shadow.py)."""
    SHADOW_DIVERGED = "ShadowDiverged"
    """The `recorded` model provider met a prompt the original never sent: the shadow stops there."""
    DEPLOYMENT_REFUSED = "DeploymentRefused"
    """A deploy guard's routing change the deployment refused (`DeploymentError`: an unknown build,
    one no worker polls): not retried; the guard ends FAILED saying why."""


class FailurePolicy(StrEnum):
    """What a run does with its side effects when it fails or is cancelled."""

    ROLLBACK_TO_LAST_CHECKPOINT = "rollback_to_last_checkpoint"
    ROLLBACK_ALL = "rollback_all"
    KEEP = "keep"


class ArtifactRef(BaseModel):
    """A blob in the artifact store, named by the sha256 of its bytes."""

    digest: str
    size: int | None = None
    """None when only the digest travelled (transcripts, a run's model call config)."""
    media_type: str = "application/octet-stream"

    @classmethod
    def json(cls, digest: str) -> ArtifactRef:  # type: ignore[override]  # shadows pydantic's deprecated v1 .json()
        return cls(digest=digest, media_type="application/json")


def problems(exc: ValidationError, whole: str = "(value)", limit: int | None = None) -> list[str]:
    """Each error of a pydantic ValidationError as `where: what`, `where` the field's path as people
    write it (`budget.max_steps`, `tool_calls.0.name`; `whole` for the value itself). The one
    formatter of validation errors: inputs, arguments, profiles, files."""
    return [f"{'.'.join(str(p) for p in err['loc']) or whole}: {err['msg']}" for err in exc.errors()[:limit]]
