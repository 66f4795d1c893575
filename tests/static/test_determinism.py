"""Determinism of the workflow code, guarded by a machine rather than by review.

AgentWorkflow is registered unsandboxed on purpose (worker CPU and replay speed, see
workflows/agent.py), so in production nothing stops a clock read, a random number, a file or an
environment variable from entering workflows/; the `imports_passed_through()` blocks there do
nothing outside a sandbox. Two machines stand in for the sandbox:

1. a static check over every module in workflows/: imports only from an explicit allowlist, and
   no reference to a non-deterministic or I/O call (clock, uuid, random, open, os.environ, ...);
2. the very same workflow code registered *sandboxed* (here, under test only) and replayed over
   every committed history in tests/histories/*.json with the SDK's SandboxedWorkflowRunner, so
   anything the sandbox restricts fails the test, not a production replay.

Each machine is also shown to fail on a planted violation.

This module is itself imported a second time *inside* the sandbox (the sandbox re-imports the
module that defines a workflow class for every run), so its top level keeps to what the sandbox
allows while it imports (histories are listed by `pytest_generate_tests`, not at import), and the
test harness is imported under `imports_passed_through()` while the workflow code is not.
"""

from __future__ import annotations

import ast
import builtins
import datetime  # inside the sandbox this is the sandbox's restricted proxy of the module
import os
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

from temporalio import workflow
from temporalio.common import RawValue

import ratchet.workflows

ROOT = Path(__file__).parents[2]  # PurePath arithmetic only: allowed inside the sandbox
HISTORIES = ROOT / "tests" / "histories"
WORKFLOWS_PACKAGE = "ratchet.workflows"
CONTRACTS = "ratchet.contracts"


def _resolve_relative(module: str | None, level: int, package: str) -> str:
    if level == 0:
        return module or ""
    parts = package.split(".")
    base = parts[: len(parts) - (level - 1)] if level > 1 else parts
    return ".".join(base + ([module] if module else []))


def _ratchet_source(module: str) -> str | None:
    """The source of a ratchet module that is a plain .py file, else None (a package, a name
    inside a module). open() and os.listdir are allowed while the sandbox imports a module."""
    parent, _, leaf = module.rpartition(".")
    package = __import__(parent, fromlist=["__name__"])
    if not hasattr(package, "__path__"):  # `parent` is a module: `leaf` is a name in it
        return None
    directory = os.path.dirname(package.__file__)
    if f"{leaf}.py" not in os.listdir(directory):
        return None
    with open(os.path.join(directory, f"{leaf}.py"), encoding="utf-8") as source:
        return source.read()


def _statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Every statement, nested ones too (imports sit in `with`, `if`, `try` and functions); not
    ast.walk: inside the sandbox every isinstance() is wrapped, and expressions are many."""
    for node in body:
        yield node
        for field in ("body", "orelse", "finalbody", "handlers"):
            yield from _statements(getattr(node, field, None) or [])


def _import_workflow_code_sandboxed() -> None:
    """Import every module of workflows/, and every ratchet module they import (but the
    contracts), dependencies first.

    Run at import, this is what makes the sandbox restrict *all* of the workflow code: agent.py
    imports its sibling modules and ratchet.core inside `workflow.unsafe.imports_passed_through()`,
    and a module first imported by name there (`from ratchet.workflows.input import parse_run`)
    reaches the sandbox as the host's unrestricted copy: a `datetime.datetime.now()` in input.py
    would go unnoticed. Imported here first, outside any passthrough block, every one is already
    in the sandbox's modules when agent.py asks for it, so it runs restricted. Outside the
    sandbox this is an ordinary import of the package."""
    directory = os.path.dirname(ratchet.workflows.__file__)
    seeds = [f"{WORKFLOWS_PACKAGE}.{f[:-3]}" for f in sorted(os.listdir(directory)) if f.endswith(".py") and f != "__init__.py"]
    done: set[str] = set()

    def visit(module: str, path: tuple[str, ...]) -> None:
        if module in done or module in path:
            return
        source = _ratchet_source(module)
        if source is None:
            return
        package = module.rpartition(".")[0]
        for node in _statements(ast.parse(source).body):
            if type(node) is ast.Import:
                candidates = [alias.name for alias in node.names]
            elif type(node) is ast.ImportFrom:
                base = _resolve_relative(node.module, node.level, package)
                candidates = [base] + [f"{base}.{alias.name}" for alias in node.names]
            else:
                continue
            for candidate in candidates:
                if candidate.startswith("ratchet.") and not (candidate + ".").startswith(CONTRACTS + "."):
                    visit(candidate, path + (module,))
        done.add(module)
        __import__(module)

    for seed in seeds:
        visit(seed, ())


_import_workflow_code_sandboxed()
from ratchet.workflows.agent import AgentWorkflow  # noqa: E402
from ratchet.workflows.closed_rollback import RollbackWorkflow  # noqa: E402

with workflow.unsafe.imports_passed_through():
    # The test harness: the host's modules, never re-imported or restricted by the sandbox.
    # (After the workflow code: passing a ratchet module through first would hand the sandbox the
    # host's `ratchet` package, and the sandboxed ratchet.workflows would be set on it.)
    import pytest
    from temporalio.client import WorkflowHistory
    from temporalio.worker import Replayer
    from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

    from ratchet.contracts import AgentResult, ClosedRollback
    from ratchet.payloads.converter import BASE_CONVERTER
    from ratchet.replay.outcomes import Outcome
    from ratchet.replay.replayer import Loaded, load_file

# The SDK's default restrictions, plus ratchet.contracts passed through by configuration: the
# contracts are pure data (pydantic and the standard library), and workflows/ passes them through
# already. A sandboxed copy would be a second set of model classes, not the ones the data
# converter decodes into, and would rebuild every pydantic schema for every run. Configured here
# rather than left to import order: ratchet.core.budget imports the contracts without a
# passthrough block.
#
# pytest is passed through too: it is the test harness, not workflow code, and its decorators
# (and the assertion rewriter's import in this module) import _pytest modules lazily, which the
# sandbox would otherwise re-import for every run (a quarter of a second each).
#
# cryptography is passed through as well: ratchet.core.decision_proof checks a decision's Ed25519
# signature with it (pure computation in its Rust extension), and an extension module cannot be
# imported a second time inside the sandbox.
RESTRICTIONS = SandboxRestrictions.default.with_passthrough_modules(CONTRACTS, "pytest", "_pytest", "cryptography")


# --- 1. static check: imports and calls ---------------------------------------------------

# Every module workflow code may import, and why it is deterministic and free of I/O. A module
# is allowed with its submodules only if it is listed in ALLOWED_PACKAGES. Add a module here only
# after checking it does no I/O and reads no clock, randomness or environment (at import or use).
ALLOWED_IMPORTS: dict[str, str] = {
    "__future__": "compiler directives",
    "asyncio": "gather/create_task/CancelledError/TimeoutError on Temporal's deterministic event loop "
    "(asyncio.sleep, asyncio.wait and asyncio.as_completed are banned below)",
    "collections.abc": "abstract types for annotations (Awaitable, Callable, Coroutine)",
    "json": "pure parsing and serialization",
    "functools": "wraps() of the workflow's init (input.any_inputs)",
    "dataclasses": "replace() (saga's undo activity definition)",
    "datetime": "types and parsing only (datetime.now, utcnow, today, date.today are banned below)",
    "typing": "annotations",
    "re": "pure pattern matching",
    "hashlib": "sha256 of a session message's text (workflows/sessions.py: a reused message id is compared by it)",
    "temporalio.workflow": "the workflow API itself: workflow.now, sleep, random, uuid4, activities",
    "temporalio.common": "RetryPolicy, RawValue, search attribute types: plain data",
    "temporalio.exceptions": "ApplicationError and the activity/child failure types",
    "temporalio.activity": "workflows/sdk_seams.py only: reads the name @activity.defn gave a function (for the "
    "plugin); nothing of it runs in workflow code",
    "temporalio.contrib.workflow_streams": "the run's stream: an in-memory log behind signal, update and query "
    "handlers (workflow.now for its dedup state); no I/O, no clock or randomness",
    "pydantic": "ValidationError of the contracts (models come from ratchet.contracts)",
    "ratchet.contracts": "the data contracts: pydantic and the standard library only",
    "ratchet.core.keys": "idempotency keys: pure string functions",
    "ratchet.core.budget": "budget arithmetic: pure functions",
    "ratchet.core.approval_rules": "approval patterns matched against a call's arguments: globs and regexes over "
    "text, number comparisons, pure functions (its compile cache is keyed by the pattern's text)",
    "ratchet.core.decision_proof": "Ed25519 checks of a decision's proof (cryptography's verify: pure, no I/O), "
    "the time passed in",
    "ratchet.core.guardrails": "guardrail matching and redaction: regular expressions over text, pure functions",
    "ratchet.core.search_keys": "the SDK's typed key of each declared search attribute: plain data",
    "ratchet.workflows": "the workflow package itself (checked by this same test)",
    "weakref": "workflows/shared_parts.py: equal plan parts held once while a run holds them; which equal object "
    "a run gets changes nothing it does",
}
ALLOWED_PACKAGES = ("ratchet.contracts", "ratchet.workflows")
# Vetted as deterministic and I/O-free, not allowed until something needs them (add them to
# ALLOWED_IMPORTS then): collections, enum, itertools, math.

NOW = "workflow.now() (deterministic, the workflow task's time)"
SLEEP = "await workflow.sleep() (a durable timer)"
UUID = "workflow.uuid4() (deterministic per run)"
RANDOM = "workflow.random() (a random.Random seeded deterministically per run)"
IO = "an activity (all I/O happens in activities/) or a value passed in the run input or RunPlan"

# Fully qualified names that workflow code must not reference (call or pass around), with what
# to use instead. A name also bans every attribute under it ("random" bans random.choice, ...).
BANNED: dict[str, str] = {
    "datetime.datetime.now": NOW,
    "datetime.datetime.utcnow": NOW,
    "datetime.datetime.today": NOW,
    "datetime.date.today": NOW,
    "time.time": NOW,
    "time.time_ns": NOW,
    "time.monotonic": NOW,
    "time.monotonic_ns": NOW,
    "time.perf_counter": NOW,
    "time.perf_counter_ns": NOW,
    "time.sleep": SLEEP,
    "uuid.uuid1": UUID,
    "uuid.uuid4": UUID,
    "random": RANDOM,
    "secrets": RANDOM,
    "os.environ": IO,
    "os.getenv": IO,
    "open": IO,
    "builtins.open": IO,
    "io.open": IO,
    "print": "workflow.logger (replay-aware: it does not repeat lines on replay)",
    "hash": "a stable key from the data itself: str hashes differ per process (PYTHONHASHSEED)",
    "asyncio.sleep": SLEEP,
    "asyncio.wait": "workflow.wait() (asyncio.wait iterates a set: order differs per process)",
    "asyncio.as_completed": "workflow.as_completed() (asyncio.as_completed is not deterministic)",
}
BUILTIN_BANS = {name for name in BANNED if "." not in name and hasattr(builtins, name)}


@dataclass(frozen=True)
class Violation:
    file: str
    line: int
    name: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.message}"


def _import_allowed(module: str) -> bool:
    if module in ALLOWED_IMPORTS:
        return True
    return any(module.startswith(package + ".") for package in ALLOWED_PACKAGES)


def _dotted(node: ast.AST) -> list[str] | None:
    """`a.b.c` -> ["a", "b", "c"]; None for anything that is not a plain name chain."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return parts[::-1]


def check_source(source: str, file: str, package: str = WORKFLOWS_PACKAGE) -> list[Violation]:
    """Every import outside ALLOWED_IMPORTS and every reference to a BANNED name in `source`
    (a module of `package`, for relative imports), in line order."""
    tree = ast.parse(source, filename=file)
    found: dict[tuple[int, str], Violation] = {}
    aliases: dict[str, str] = {}  # local name -> the fully qualified name it was imported as

    def forbid_import(node: ast.stmt, module: str) -> None:
        instead = "; ".join(dict.fromkeys(
            hint for name, hint in BANNED.items() if name == module or name.startswith(module + ".")
        )) or "an activity for any I/O"
        found[(node.lineno, module)] = Violation(
            file, node.lineno, module,
            f"import of {module!r} is not in the workflow import allowlist (tests/static/test_determinism.py "
            f"ALLOWED_IMPORTS): workflow code must stay deterministic and free of I/O; use {instead}, "
            "or allowlist the module with the reason it is deterministic",
        )

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                aliases[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else alias.name.split(".")[0]
                if not _import_allowed(alias.name):
                    forbid_import(node, alias.name)
        elif isinstance(node, ast.ImportFrom):
            module = _resolve_relative(node.module, node.level, package)
            for alias in node.names:
                full = f"{module}.{alias.name}"
                if alias.name != "*":
                    aliases[alias.asname or alias.name] = full
                # `from X import Y`: fine if X is allowed, or if Y is an allowed submodule of X
                # (`from ratchet.core import budget` allows ratchet.core.budget, not ratchet.core)
                if not _import_allowed(module) and not _import_allowed(full):
                    forbid_import(node, full if alias.name != "*" else module)

    for node in ast.walk(tree):
        if not isinstance(node, (ast.Name, ast.Attribute)):
            continue
        parts = _dotted(node)
        if parts is None:
            continue
        head = parts[0]
        if head in aliases:
            qualified = ".".join([aliases[head], *parts[1:]])
        elif len(parts) == 1 and head in BUILTIN_BANS:
            qualified = head
        else:
            continue  # a local name, not a module or a builtin
        for banned, instead in BANNED.items():
            if qualified == banned or qualified.startswith(banned + "."):
                written = ".".join(parts)
                key = (node.lineno, banned)
                if key not in found:
                    shown = written if written == qualified else f"{written} ({qualified})"
                    found[key] = Violation(
                        file, node.lineno, banned,
                        f"{shown} is forbidden in workflow code (not deterministic on replay, "
                        f"or I/O): use {instead}",
                    )
    return sorted(found.values(), key=lambda v: (v.line, v.name))


def workflow_sources() -> list[Path]:
    """Every .py file of the installed ratchet.workflows package directory (workflows/)."""
    directory = Path(ratchet.workflows.__file__).parent
    return sorted(p for p in directory.rglob("*.py") if "__pycache__" not in p.parts)


def _module_package(path: Path) -> str:
    """The package a module's relative imports resolve against."""
    directory = Path(ratchet.workflows.__file__).parent
    relative = path.relative_to(directory)
    return ".".join([WORKFLOWS_PACKAGE, *relative.parent.parts])


def test_workflow_modules_import_only_the_allowlist_and_call_nothing_nondeterministic():
    sources = workflow_sources()
    assert len(sources) > 1, f"no workflow modules found under {ratchet.workflows.__file__}"
    root = Path(ratchet.workflows.__file__).parent.parent
    violations = [
        v for path in sources
        for v in check_source(path.read_text(encoding="utf-8"), str(path.relative_to(root)), _module_package(path))
    ]
    assert not violations, "non-deterministic code in workflows/:\n" + "\n".join(map(str, violations))


SYNTHETIC = '''\
import random
from datetime import datetime
import os

from temporalio import workflow


async def step() -> None:
    started = datetime.now()
    with open("notes.txt") as f:
        f.read()
    token = os.environ.get("API_KEY")
    pick = random.choice([1, 2])
    ok = workflow.now()
'''


def test_the_static_check_reports_each_forbidden_import_and_call():
    violations = check_source(SYNTHETIC, "workflows/synthetic.py")
    by_line = {(v.line, v.name): str(v) for v in violations}
    expected = {
        (1, "random"): ["workflows/synthetic.py:1:", "'random'", "allowlist", "workflow.random()"],
        (3, "os"): ["workflows/synthetic.py:3:", "'os'", "allowlist", "an activity"],
        (9, "datetime.datetime.now"): ["workflows/synthetic.py:9:", "datetime.now", "workflow.now()"],
        (10, "open"): ["workflows/synthetic.py:10:", "open", "an activity"],
        (12, "os.environ"): ["workflows/synthetic.py:12:", "os.environ", "an activity"],
        (13, "random"): ["workflows/synthetic.py:13:", "random.choice", "workflow.random()"],
    }
    assert set(by_line) == set(expected), "\n".join(map(str, violations))
    for key, fragments in expected.items():
        for fragment in fragments:
            assert fragment in by_line[key], f"{by_line[key]!r} lacks {fragment!r}"


def test_aliases_relative_imports_and_submodules_are_resolved():
    source = (
        "from datetime import datetime as dt\n"
        "from . import saga\n"
        "from ratchet.core import budget as budgets, profiles\n"
        "import time as clock\n"
        "import asyncio\n"
        "x = dt.utcnow()\n"
        "y = clock.monotonic()\n"
        "asyncio.wait([])\n"
        "asyncio.wait_for(None, 1)\n"
        "now = dt.now\n"
    )
    found = {(v.line, v.name) for v in check_source(source, "workflows/x.py")}
    assert found == {
        (3, "ratchet.core.profiles"), (4, "time"), (6, "datetime.datetime.utcnow"),
        (7, "time.monotonic"), (8, "asyncio.wait"), (10, "datetime.datetime.now"),
    }


# --- 2. the same workflow code, sandboxed, over every committed history -------------------


@workflow.defn(name="AgentWorkflow", sandboxed=True)
class SandboxedAgentWorkflow(AgentWorkflow):
    """AgentWorkflow unchanged, run inside the SDK's sandbox. Signals, queries and updates are
    inherited (the SDK collects them from the base class); only @workflow.run must be re-declared
    on the subclass."""

    @workflow.run
    async def run(self, raw: RawValue = None) -> AgentResult:  # type: ignore[assignment]
        return await super().run(raw)


@workflow.defn(name="RollbackWorkflow", sandboxed=True)
class SandboxedRollbackWorkflow(RollbackWorkflow):
    """RollbackWorkflow unchanged, in the sandbox (the corpus holds the rollback of a closed run)."""

    @workflow.run
    async def run(self, raw: RawValue = None) -> ClosedRollback:  # type: ignore[assignment]
        return await super().run(raw)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Whatever histories are committed at the top level of tests/histories (sub-folders hold
    older recordings, replayed by test_replay.py). Listed here, not at import: the sandbox imports
    this module too, and restricts Path.glob."""
    if "history" in metafunc.fixturenames:
        paths = sorted(HISTORIES.glob("*.json"))
        metafunc.parametrize("history", paths, ids=[p.name for p in paths])


def _sandboxed_replayer(*workflow_classes: type) -> Replayer:
    # The committed histories are recorded without encryption and with offload off (no keys and
    # no artifact store are committed with them): the worker's payload converter without codec or
    # external storage (ratchet.payloads.converter.BASE_CONVERTER) decodes them.
    return Replayer(
        workflows=list(workflow_classes), data_converter=BASE_CONVERTER,
        workflow_runner=SandboxedWorkflowRunner(restrictions=RESTRICTIONS),
    )


@pytest.fixture(scope="module")
async def sandboxed_replays() -> dict[str, Loaded | Outcome | Exception | None]:
    """Every committed history replayed once through the sandboxed workflows, by file name: its
    replay failure (None: replayed clean), or the loading error. One replay pass for all of them:
    the replayer builds (and the sandbox imports) the workflow once per pass, not per history."""
    paths = sorted(HISTORIES.glob("*.json"))
    loaded = {p.name: load_file(p) for p in paths}  # as the replay gate loads them
    histories = [(name, item) for name, item in loaded.items() if isinstance(item, Loaded)]
    outcomes: dict[str, Loaded | Outcome | Exception | None] = dict(loaded)

    async def each() -> AsyncIterator[WorkflowHistory]:
        for _, item in histories:
            yield item.history

    replayer = _sandboxed_replayer(SandboxedAgentWorkflow, SandboxedRollbackWorkflow)
    async with replayer.workflow_replay_iterator(each()) as results:
        names = iter(histories)
        async for result in results:
            outcomes[next(names)[0]] = result.replay_failure
    return outcomes


def test_there_are_histories_to_replay():
    assert sorted(HISTORIES.glob("*.json")), f"no histories in {HISTORIES}: run `make histories`"


async def test_history_replays_in_the_sandbox(history: Path, sandboxed_replays: dict):
    outcome = sandboxed_replays[history.name]
    assert not isinstance(outcome, Outcome), outcome.detail
    assert not isinstance(outcome, Loaded), f"{history.name} was not replayed"
    assert outcome is None, f"{history.name} fails to replay under the workflow sandbox: {outcome}"


# --- 3. the sandbox catches a real non-deterministic call ---------------------------------


@workflow.defn(name="AgentWorkflow", sandboxed=True)
class ClockReadingAgentWorkflow(AgentWorkflow):
    """A workflow that reads the wall clock: what the static check forbids in workflows/."""

    @workflow.run
    async def run(self, raw: RawValue = None) -> AgentResult:  # type: ignore[assignment]
        self.started = datetime.datetime.now()
        return await super().run(raw)


@workflow.defn(name="AgentWorkflow", sandboxed=True)
class FileReadingAgentWorkflow(AgentWorkflow):
    """A workflow that does I/O itself instead of in an activity."""

    @workflow.run
    async def run(self, raw: RawValue = None) -> AgentResult:  # type: ignore[assignment]
        with open(__file__) as source:
            self.source = source.read()
        return await super().run(raw)


@pytest.mark.parametrize(
    ("workflow_class", "restricted"),
    [(ClockReadingAgentWorkflow, "datetime.datetime.now"), (FileReadingAgentWorkflow, "__builtins__.open")],
    ids=["datetime.now", "open"],
)
async def test_the_sandbox_fails_a_replay_that_calls_something_restricted(workflow_class: type, restricted: str):
    path = min(HISTORIES.glob("*.json"), key=lambda p: p.stat().st_size)  # any one will do
    history = load_file(path)
    assert isinstance(history, Loaded), history.detail
    result = await _sandboxed_replayer(workflow_class).replay_workflow(history.history, raise_on_replay_failure=False)
    failure = result.replay_failure
    assert failure is not None, f"{workflow_class.__name__} replayed {path.name} without a failure"
    # Core reports the failed workflow task with the sandbox's error type and message.
    assert "RestrictedWorkflowAccessError" in str(failure), str(failure)
    assert f"Cannot access {restricted}" in str(failure), str(failure)
