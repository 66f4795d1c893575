"""Activity inputs and outputs: model calls, tool calls, undo, verification, forks."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from ratchet.contracts.base import ArtifactRef
from ratchet.contracts.plan import Verifier
from ratchet.contracts.sandbox import SandboxPolicy


class ToolCallRequest(BaseModel):
    """A tool call as the model wrote it; `arguments` is the raw JSON text."""

    id: str
    name: str
    arguments: str


class Message(BaseModel):
    role: Literal["system", "user", "assistant", "tool"]
    content: str | None = None
    tool_calls: list[ToolCallRequest] = Field(default_factory=list)
    tool_call_id: str | None = None
    is_error: bool = False
    """A tool message whose call failed (its content says why); providers that mark errors apart
    (Anthropic's `tool_result.is_error`) use it."""
    content_ref: ArtifactRef | None = None
    """Full content in the artifact store when `content` is a shortened preview."""
    answered_by: str = ""
    """An assistant message a fallback model wrote: `provider/model` ("": the run's own model)."""
    turn: int = 0
    """The session turn this user message opens (0: none): the transcript shows where turns begin."""
    summary: bool = False
    """A compaction's summary of the conversation before it (`model.compact`): the model sees it
    instead of those messages; the transcript keeps them all."""
    pinned: bool = False
    """Sent to the model whatever its context window (a fork's objective; the system prompt and the
    run's objective, the first two messages, always are)."""


class Usage(BaseModel):
    prompt_tokens: int = 0
    """Every input token billed, cached or not."""
    completion_tokens: int = 0
    cache_read_tokens: int = 0
    """Of `prompt_tokens`, read from the provider's prompt cache (billed at its discount)."""
    cache_write_tokens: int = 0
    """Of `prompt_tokens`, written to the provider's prompt cache (billed at its surcharge)."""

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class Billed(Usage):
    """What the billing ledger billed for a model call's attempts (activities/billing.py): every
    attempt, failed or not, as the provider counted it, else estimated."""

    cost_usd: float = 0.0
    attempts: int = 0
    estimated: bool = False
    """Some attempt's usage is an estimate (the provider sent none: prompt and streamed characters)."""
    unpriced: bool = False
    """Some attempt's model has no price (ratchet/core/prices.py): its cost counts $0."""

    def add(self, other: Billed) -> Billed:
        return Billed(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            cost_usd=self.cost_usd + other.cost_usd,
            attempts=self.attempts + other.attempts,
            estimated=self.estimated or other.estimated,
            unpriced=self.unpriced or other.unpriced,
        )


class ModelRequest(BaseModel):
    """Only what is new since the previous call: the conversation so far is the `transcript`
    artifact, settings and tool schemas the run's `call_ref` artifact (both digests). The
    idempotency key is `{workflow id}/{step}/model`, made by the activity from its own info."""

    step: int
    new_messages: list[Message]
    call_ref: str
    transcript: str | None = None
    max_tokens: int | None = None
    """The run's token budget left: this call's prompt and output together may use at most this
    many. The model activity refuses a call whose prompt alone does not fit and caps its output
    (`ratchet.core.budget.output_cap`). None: no limit."""
    max_cost_usd: float | None = None
    """The run's cost budget left, at the model's prices (None: the run has no cost budget)."""
    choice: int = 0
    """Which of the run's models to call: 0 the run's own, N its Nth fallback (`RunPlan.fallbacks`)."""


class Streamed(BaseModel):
    """What one attempt of a streaming model call published of its reply (activities/streaming.py):
    the rest goes out from the workflow when the reply arrives (workflows/events.py, `rest_of_reply`)."""

    attempt: int
    started: bool = False
    """Its `AttemptStarted` went out."""
    text: int = 0
    """Characters of the reply's text published."""
    calls: dict[int, int] = Field(default_factory=dict)
    """Per tool call (by index) whose name went out: characters of its arguments published."""


class ModelReply(BaseModel):
    message: Message
    usage: Usage
    transcript: str
    """Digest of the conversation including this reply."""
    finish_reason: str | None = None
    """Only when the message does not say it: e.g. "length" (output cut at max tokens), not
    "tool_calls" or "stop"."""
    model: str = ""
    """Only when the provider names another model than the run's settings (e.g. a dated snapshot)."""
    output: Any = None
    """A final answer of a run with an output schema, parsed and matching it."""
    output_error: str | None = None
    """A final answer that does not match the run's output schema: what is wrong, for the model."""
    streamed: Streamed | None = None
    """A streaming call: what its attempt published of the reply. The workflow publishes the rest,
    which adds nothing to history (a fast reply: all of it)."""
    billed: Billed | None = None
    """Every attempt of this call on this model, as billed (None: no billing ledger on the worker:
    the workflow charges `usage`). A failed call's billed attempts travel in its failure's details."""


class CompactRequest(BaseModel):
    """Input of `model.compact`: summarise the conversation `transcript` (a session's older turns).
    Its idempotency key is `{workflow id}/{step}/compact`, made by the activity."""

    step: int
    call_ref: str
    transcript: str
    turns: str
    """Which turns it summarises, for the summary's heading ("1-12")."""


class CompactReply(BaseModel):
    message: Message
    """The summary, as the conversation's next message (`summary=True`)."""
    usage: Usage
    transcript: str
    """Digest of the conversation with the summary."""
    billed: Billed | None = None
    """As `ModelReply.billed`."""


class ToolInvocation(BaseModel):
    step: int
    call_id: str
    arguments: dict[str, Any]
    workspace: str
    key: str = ""
    workflow_id: str = ""
    tool: str = ""
    """Empty: filled by the tool activity from its own info (workflow id, activity type), the key
    as `{workflow id}/{step}/{call id}`; so history does not repeat them for every call."""
    sandbox: SandboxPolicy = Field(default_factory=SandboxPolicy)
    """The run's sandbox policy (`RunPolicy.sandbox`), for tools that run programs; sent only by
    workspace tools, and absent from history while it is the default."""
    memory_scope: str | None = None
    """The run's `memory_scope`, for the memory tools (activities/memory_tools.py)."""
    decision: Literal["retry", "assume_done"] | None = None
    """A person's decision on this call's unknown outcome (`decide`): applies to the activity's first attempt."""
    assumed_output: str | None = None
    """With `assume_done`: the output recorded as the call's result."""
    catalog: str = ""
    """For a tool of an MCP server (activity `mcp.<server>`, which then needs `tool` too): the digest
    of the run's pinned MCP tool list (`RunPlan.mcp_ref`). Empty for every other tool."""
    host: str | None = None
    """For a workspace tool sent to the run's own queue (a local activity, or an activity the
    workflow's worker may take eagerly): the host queue holding the run's workspace
    (`AgentState.workspace_host`). A worker of another host answers NotOnThisHost without acting."""


class ToolResult(BaseModel):
    ok: bool
    output: str
    output_ref: ArtifactRef | None = None
    undo: dict[str, Any] | None = None
    error_type: str | None = None


class UndoInvocation(BaseModel):
    key: str
    """The forward call's key; the undo's own key is `{key}/undo`."""
    workflow_id: str
    step: int
    call_id: str
    tool: str
    arguments: dict[str, Any]
    workspace: str
    undo: dict[str, Any] | None


class Evidence(BaseModel):
    """What a verifier run showed about a step."""

    argv: list[str]
    exit_code: int
    passed: bool
    """The verifier exited 0 and did not report that it ran no test: the step is verified."""
    tests_run: int | None = None
    """Tests the output says ran (unittest's `Ran N tests`, pytest's summary); None: no count in it."""
    tests_failed: int | None = None
    output: str
    output_ref: ArtifactRef | None = None
    no_tests: bool = False
    """The verifier ran no test (pytest's exit code 5, unittest's `Ran 0 tests`): evidence of nothing.
    Neither passed nor failed: the step is kept as an unverified checkpoint (`Checkpoint.verified`)."""
    reused: bool = False
    """Not run again: the workspace's files are byte for byte those a run of the same verifier that
    did not fail (passed, or found no test), in the same sandbox, left on this worker; this is that
    run's evidence."""

    @property
    def failed(self) -> bool:
        """The verifier found the step wrong (or could not run): back to the model, maybe reverted."""
        return not self.passed and not self.no_tests


class VerifyRequest(BaseModel):
    key: str
    workflow_id: str
    workspace: str
    verifier: Verifier
    changed: dict[str, ArtifactRef | None] = Field(
        default_factory=dict, description="Paths written since the last checkpoint -> bytes before (None: absent)."
    )
    sandbox: SandboxPolicy = Field(default_factory=SandboxPolicy)
    """The run's sandbox policy: the verifier runs in it as `run_command` does."""
    host: str | None = None
    """As `ToolInvocation.host`: sent to the run's own queue, it runs only on this host queue."""


class VerifyResult(BaseModel):
    evidence: Evidence
    patch_ref: ArtifactRef | None = None
    workspace_ref: ArtifactRef | None = None
    """Manifest {path: ArtifactRef} of every workspace file, for forks."""


class OpenWorkspace(BaseModel):
    workspace: str


class RehydrateWorkspace(BaseModel):
    workspace: str
    manifest_ref: ArtifactRef | None = None
    """Manifest {path: ArtifactRef} to restore into an emptied workspace (None: leave it empty)."""


class WorkspaceBinding(BaseModel):
    """Which host holds a run's workspace: the task queue of its workspace activities, and the
    manifest of the files it holds (at open: a snapshot; after a rehydrate: what was restored)."""

    host_queue: str
    manifest_ref: ArtifactRef | None = None


class LoadCheckpoint(BaseModel):
    workflow_id: str
    checkpoint_id: str
    workspace: str
    """The new run's workspace, which receives the checkpoint's files."""
