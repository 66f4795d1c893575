"""Registering typed Python functions as agent tools.

    @tool(effect="compensable", timeout_s=30)
    async def write_file(ctx: ToolContext, args: WriteFileArgs) -> ToolOutput: ...

The argument model's JSON schema is what the model sees; each tool runs as its own Temporal
activity type `tool.<name>`, with the timeout and retry policy declared here.

Errors, on purpose:
- `ToolError`: the call failed in a way the model should see and can react to (file not found,
  path refused). Not retried; returned to the model as the tool's result.
- `FatalToolError`: the run cannot go on (non-retryable); the run's failure policy applies.
- anything else: transient; Temporal retries the activity with the tool's retry policy.

Arguments the operating system rejects are the model's to see, for every tool, in two places:
`nul_problem` refuses a NUL character in any string argument before the tool runs (no path,
argv, environment or Postgres text can hold one), and `Tool.call` turns an `OSError` the OS raised
for a path inside the run's workspace (`PATH_ERRNOS`: name too long, a directory where a file is
meant, a file where a directory is meant, ...) into a `ToolError`. Other OS errors stay transient.
"""

from __future__ import annotations

import copy
import errno
import functools
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel

from ratchet.contracts import UNDO_DESCRIPTION, ArtifactRef, EffectClass, SandboxPolicy, ToolSchema, ToolSpec
from ratchet.contracts.sandbox import Sandbox


class Blobs(Protocol):
    """The artifact store as a tool sees it (`ratchet.stores.artifacts.ArtifactStore` is one):
    content-addressed blobs, named by the sha256 of their bytes."""

    def put(self, data: bytes, media_type: str = "application/octet-stream") -> ArtifactRef: ...

    def get(self, ref: ArtifactRef) -> bytes: ...


class WorkerSettings(Protocol):
    """What a tool reads of the worker's settings (`ctx.settings`), typed here so that core needs
    nothing of ops: the worker passes its `ratchet.ops.settings.Settings`, which has these and the
    rest (`ratchet config` lists them; `cast` to `Settings` to read another)."""

    @property
    def task_queue(self) -> str: ...

    @property
    def host_id(self) -> str: ...

    @property
    def build_id(self) -> str | None: ...

    @property
    def ledger_store_url(self) -> str: ...


class ToolError(Exception):
    """A failure the model sees as the tool's result; not retried."""


class FatalToolError(Exception):
    """A failure that ends the run (its failure policy applies); not retried."""


class NotStarted(Exception):
    """Raised by a side-effecting tool that failed *before* it acted (it could not reach the
    target system, a precondition failed): the ledger forgets the attempt and the activity is
    retried under its retry policy like any transient error. Any other exception leaves the
    attempt STARTED, so the next attempt's outcome is unknown and needs a reconcile hook, an
    idempotent tool, or a person's decision."""


@dataclass
class ToolContext:
    """What a running tool may use. `key` is stable across retries, worker crashes and
    continue-as-new: pass it to the systems you touch as their idempotency key."""

    key: str
    workflow_id: str
    step: int
    call_id: str
    attempt: int
    workspace: Path
    """The run's workspace directory on this host: only a tool declared `workspace=True` runs on the
    host that holds the run's files."""
    artifacts: Blobs
    record_undo: Callable[[dict[str, Any]], None] = lambda undo: None
    """Record what the undo needs *before* acting: if the worker dies mid-call, undo still works.
    Build the record with `undo_record`, so a rollback plan can say what the undo will do."""
    settings: WorkerSettings | None = None
    """The worker's settings (`ratchet.ops.settings.Settings`): the ledger's store, the build, the
    host; None where a tool runs without a worker (a test's own context)."""
    heartbeat: Callable[..., None] = lambda *details: None
    """Report progress (long tools); the details come back in `resume_from` after a retry."""
    resume_from: Any = None
    """Details of the last heartbeat of an earlier attempt, or None."""
    sandbox: Sandbox | None = None
    """Where a tool declared `runs_code` runs programs (the worker's backend, RATCHET_SANDBOX):
    `ratchet.activities.commands.run_program(ctx.sandbox, argv, ctx.workspace, ctx.sandbox_policy)`.
    None for the other tools."""
    sandbox_policy: SandboxPolicy = field(default_factory=SandboxPolicy)
    """The run's limits, environment allowlist and network for those programs (its profile's)."""
    memory_scope: str | None = None
    """The run's `memory_scope` (whose memory the memory tools use); None: the run named none."""


@dataclass
class ToolOutput:
    """A tool's result: text for the model, plus what its undo needs."""

    output: str
    undo: dict[str, Any] | None = None
    """What the undo needs; build it with `undo_record`."""


def undo_record(description: str, **info: Any) -> dict[str, Any]:
    """An undo record: what the undo needs (`info`), plus a short description of what the undo will
    do, for the person deciding on a rollback ("restore a.txt (181 bytes)", "delete ticket #12").
    Rollback plans show it (`Effect.undo_description`); the undo function may ignore it."""
    return {UNDO_DESCRIPTION: description, **info}


ToolFn = Callable[[ToolContext, Any], Awaitable[Any] | Any]
UndoFn = Callable[[ToolContext, Any, dict[str, Any] | None], Awaitable[Any] | Any]


@dataclass
class Tool:
    name: str
    description: str
    args_model: type[BaseModel]
    fn: ToolFn
    effect: EffectClass = EffectClass.READ_ONLY
    timeout_s: float = 60.0
    max_attempts: int = 5
    idempotent: bool = False
    kind: str = "activity"
    heartbeat_s: float | None = None
    """Long tools: heartbeat timeout; call ctx.heartbeat(progress) well within it."""
    workspace: bool = False
    """Reads or writes `ctx.workspace`: runs (with its undo) on the host holding the run's workspace
    (a fast read-only one as a local activity where the workflow's worker is on that host). A tool
    that uses `ctx.workspace` must say so."""
    runs_code: bool = False
    """Runs programs (implies `workspace`): gets `ctx.sandbox`, and is left out of a worker whose
    sandbox cannot run (docs/SECURITY.md). Any tool that starts a process must say so."""
    undo: UndoFn | None = None
    reconcile: ToolFn | None = None
    """`reconcile(ctx, args)` -> ToolOutput if the interrupted call took effect, else None."""

    def spec(self) -> ToolSpec:
        return ToolSpec(
            name=self.name,
            effect=self.effect,
            timeout_s=self.timeout_s,
            max_attempts=self.max_attempts,
            has_undo=self.undo is not None,
            kind=self.kind,
            heartbeat_s=self.heartbeat_s,
            workspace=self.workspace,
        )

    def tool_schema(self) -> ToolSchema:
        """What the model is told of this tool: its arguments' JSON Schema in the model's field order."""
        return ToolSchema(name=self.name, description=self.description, parameters=arguments_schema(self.args_model))

    async def call(self, ctx: ToolContext, args: BaseModel) -> ToolOutput:
        try:
            return _as_output(await _maybe_await(self.fn(ctx, args)))
        except OSError as exc:
            problem = path_problem(ctx.workspace, exc)
            if problem is None:
                raise
            raise ToolError(problem) from None

    async def call_undo(self, ctx: ToolContext, args: BaseModel, undo: dict[str, Any] | None) -> ToolOutput:
        assert self.undo is not None
        return _as_output(await _maybe_await(self.undo(ctx, args, undo)))

    async def call_reconcile(self, ctx: ToolContext, args: BaseModel) -> ToolOutput | None:
        assert self.reconcile is not None
        found = await _maybe_await(self.reconcile(ctx, args))
        return None if found is None else _as_output(found)


@functools.lru_cache(maxsize=1024)
def _arguments_schema(model: type[BaseModel]) -> dict[str, Any]:
    schema = model.model_json_schema()
    schema.pop("title", None)
    return schema


def arguments_schema(model: type[BaseModel]) -> dict[str, Any]:
    """A tool's arguments' JSON Schema, generated once per model class (pydantic's generator took
    3% of a worker's Python CPU, every run planned anew); a copy, so callers may change it."""
    return copy.deepcopy(_arguments_schema(model))


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


def _as_output(value: Any) -> ToolOutput:
    return value if isinstance(value, ToolOutput) else ToolOutput(output=str(value))


PATH_ERRNOS = frozenset(
    {
        errno.ENAMETOOLONG,
        errno.EISDIR,
        errno.ENOTDIR,
        errno.EEXIST,
        errno.ENOTEMPTY,
        errno.ELOOP,
        errno.ENOENT,
        errno.EACCES,
        errno.EPERM,
        errno.EILSEQ,
        errno.EINVAL,
        errno.EFBIG,
    }
)
"""OS errors that say the path a call named cannot be used as asked: a retry would fail the same way."""
SHOWN_PATH_CHARS = 120


def path_problem(workspace: Path, exc: OSError) -> str | None:
    """What to tell the model about `exc` if the OS refused a path inside `workspace` (one of
    PATH_ERRNOS), else None: an error about the worker's own files (a ledger, a tracker database)
    is the operator's and stays an error the activity retries."""
    if exc.errno not in PATH_ERRNOS or not isinstance(exc.filename, str):
        return None
    path = Path(exc.filename)
    if path != workspace and workspace not in path.parents:
        return None
    shown = str(path.relative_to(workspace)) if path != workspace else "."
    if len(shown) > SHOWN_PATH_CHARS:
        shown = f"{shown[:SHOWN_PATH_CHARS]}... ({len(shown)} characters)"
    return f"{shown}: {exc.strerror or errno.errorcode.get(exc.errno or 0, 'refused by the OS')}"


def nul_problem(arguments: Any, at: str = "") -> str | None:
    """Where a NUL character sits in a tool's arguments (JSON: keys and strings), said to the model,
    or None. The OS takes no NUL in a path, an argv or an environment value, and Postgres none in
    text, so it is refused for every tool before the tool runs."""
    if isinstance(arguments, str):
        return f"{at or '(arguments)'}: must be text without NUL characters" if "\x00" in arguments else None
    if isinstance(arguments, dict):
        items = list(arguments.items())
    elif isinstance(arguments, list):
        items = list(enumerate(arguments))
    else:
        return None
    for key, value in items:
        field = f"{at}.{key}" if at else str(key)
        if isinstance(key, str) and "\x00" in key:
            return f"{at or '(arguments)'}: keys must be text without NUL characters"
        problem = nul_problem(value, field)
        if problem is not None:
            return problem
    return None


LOCAL_TOOL_MAX_S = 30.0


def runs_locally(spec: ToolSpec) -> bool:
    """Fast read-only activity tools run as local activities. Only read-only ones: a local
    activity whose worker dies is run again by the next, which a side effect must not be. No
    heartbeating ones, and a short timeout: a local activity holds its workflow task open.
    Workspace tools too: a local activity runs on the worker holding the workflow task, which need
    not be on the host holding the workspace, so such a call acts only there (`ToolInvocation.host`)
    and otherwise goes to the host's queue."""
    return (
        spec.kind == "activity"
        and spec.effect == EffectClass.READ_ONLY
        and spec.heartbeat_s is None
        and spec.timeout_s <= LOCAL_TOOL_MAX_S
    )


@dataclass
class ToolRegistry:
    tools: dict[str, Tool] = field(default_factory=dict)

    def register(self, tool: Tool) -> Tool:
        existing = self.tools.get(tool.name)
        if existing is not None and _origin(existing.fn) != _origin(tool.fn):
            raise ValueError(f"tool {tool.name!r} is already registered by {_origin(existing.fn)}")
        self.tools[tool.name] = tool
        return tool

    def tool(
        self,
        name: str | None = None,
        *,
        effect: EffectClass | str = EffectClass.READ_ONLY,
        timeout_s: float = 60.0,
        max_attempts: int = 5,
        idempotent: bool = False,
        kind: str = "activity",
        heartbeat_s: float | None = None,
        workspace: bool = False,
        runs_code: bool = False,
    ) -> Callable[[ToolFn], ToolFn]:
        """Decorator: register `fn(ctx, args: SomeModel)`; the description is its docstring."""

        def register(fn: ToolFn) -> ToolFn:
            self.register(
                Tool(
                    name=name or fn.__name__,
                    description=inspect.cleandoc(fn.__doc__ or ""),
                    args_model=_args_model(fn),
                    fn=fn,
                    effect=EffectClass(effect),
                    timeout_s=timeout_s,
                    max_attempts=max_attempts,
                    idempotent=idempotent,
                    kind=kind,
                    heartbeat_s=heartbeat_s,
                    workspace=workspace or runs_code,
                    runs_code=runs_code,
                )
            )
            return fn

        return register

    def undo_for(self, name: str) -> Callable[[UndoFn], UndoFn]:
        """Decorator: `undo(ctx, args, undo_info: dict)` compensates a call of tool `name`."""

        def register(fn: UndoFn) -> UndoFn:
            self.tools[name].undo = fn
            return fn

        return register

    def reconcile_for(self, name: str) -> Callable[[ToolFn], ToolFn]:
        """Decorator: `reconcile(ctx, args)` asks the target system whether an interrupted call
        of tool `name` took effect: a ToolOutput if it did, None if it did not."""

        def register(fn: ToolFn) -> ToolFn:
            self.tools[name].reconcile = fn
            return fn

        return register

    def get(self, name: str) -> Tool:
        return self.tools[name]

    def problems(self) -> list[str]:
        """What is wrong with the registered tools, one line each (empty: all good). A worker
        refuses to start on any (`RatchetPlugin.run_worker`): a compensable tool without an undo
        could never be rolled back, which its class promises."""
        return [
            f'tool {t.name!r} is declared effect="compensable" but has no @undo_for({t.name!r}) function '
            "(add one, or declare it irreversible)"
            for t in self.tools.values()
            if t.effect == EffectClass.COMPENSABLE and t.kind == "activity" and t.undo is None
        ]

    def without_code_runners(self) -> ToolRegistry:
        """A copy without the tools declared `runs_code` (a worker whose sandbox cannot run)."""
        return ToolRegistry({name: t for name, t in self.tools.items() if not t.runs_code})


def _origin(fn: ToolFn) -> str:
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', '?')}"


def _args_model(fn: ToolFn) -> type[BaseModel]:
    hints = inspect.get_annotations(fn, eval_str=True)
    params = list(inspect.signature(fn).parameters)
    if len(params) != 2:
        raise TypeError(f"tool {fn.__name__} must take (ctx, args), got {params}")
    model = hints.get(params[1])
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        raise TypeError(f"tool {fn.__name__}: annotate its args with a pydantic model")
    return model


default_registry = ToolRegistry()
tool = default_registry.tool
undo_for = default_registry.undo_for
reconcile_for = default_registry.reconcile_for
