"""Test-only tools and a `probe` profile, loaded by workers through RATCHET_PLUGINS.

Each tool appends a line to probe.log in the run's workspace, so tests count real executions
outside Temporal.
"""

from __future__ import annotations

import asyncio

from pydantic import BaseModel

from ratchet.contracts import ApprovalRule, Budget, FailurePolicy, Guardrail, Notify, SessionPolicy, Verifier
from ratchet.contracts.guardrails import Judge
from ratchet.core.profiles import AgentProfile, register_profile
from ratchet.core.tools import FatalToolError, NotStarted, ToolContext, tool, undo_for

PROBE_LOG = "probe.log"


class AppendArgs(BaseModel):
    label: str
    fail_first: bool = False
    sleep_s: float = 0.0


def _append(ctx: ToolContext, line: str) -> None:
    with open(ctx.workspace / PROBE_LOG, "a") as log:
        log.write(line + "\n")


@tool(effect="compensable", timeout_s=3, max_attempts=20, idempotent=True, workspace=True)
async def probe_append(ctx: ToolContext, args: AppendArgs) -> str:
    """Append a label to probe.log (optionally after a pause, or failing its first attempt)."""
    _append(ctx, f"attempt {ctx.attempt} {ctx.key}")
    if args.fail_first and ctx.attempt == 1:
        raise RuntimeError("transient failure on the first attempt")
    if args.sleep_s:
        await asyncio.sleep(args.sleep_s)
    _append(ctx, f"done {ctx.key} {args.label}")
    return f"appended {args.label}"


@undo_for("probe_append")
def undo_probe_append(ctx: ToolContext, args: AppendArgs, undo: dict | None) -> str:
    _append(ctx, f"undone {ctx.key} {args.label}")
    return f"undid {args.label}"


register_profile(
    AgentProfile(
        name="probe",
        system_prompt="You are a test agent.",
        tools=["probe_append", "write_file", "read_file", "list_files", "probe_echo"],
        budget=Budget(max_steps=50),
    )
)


register_profile(
    AgentProfile(
        name="quiet",
        system_prompt="You are a test agent that does not stream.",
        tools=["list_files"],
        budget=Budget(max_steps=50),
        stream=False,
    )
)


register_profile(
    AgentProfile(
        name="chatter",
        system_prompt="You are a test assistant in a conversation.",
        tools=["probe_append", "probe_wait", "probe_echo", "write_file", "read_file", "remember", "recall", "forget"],
        budget=Budget(max_steps=5000, max_tokens=10_000_000),
        session=SessionPolicy(),
        approval_rules=[ApprovalRule(tool="probe_append", argument="label", pattern="^ask")],
    )
)
register_profile(
    AgentProfile(
        name="guarded_chatter",
        system_prompt="You are a test assistant in a conversation, within guardrails.",
        tools=["probe_echo"],
        budget=Budget(max_steps=100),
        session=SessionPolicy(),
        guardrails=[Guardrail(name="pii-in", on="input", detectors=["email"], action="redact")],
    )
)


class WaitArgs(BaseModel):
    seconds: float


class EchoArgs(BaseModel):
    text: str


class Note(BaseModel):
    path: str
    text: str


class NotesArgs(BaseModel):
    notes: list[Note]


@tool(effect="read_only", timeout_s=5)
def probe_notes(ctx: ToolContext, args: NotesArgs) -> str:
    """Say the notes back, one per line (arguments nested in a list of objects)."""
    return "\n".join(f"{note.path}: {note.text}" for note in args.notes)


@tool(effect="read_only", timeout_s=5)
def probe_echo(ctx: ToolContext, args: EchoArgs) -> str:
    """Say the text back (fast, read-only, no workspace: runs as a local activity where it may)."""
    return args.text


@tool(effect="read_only", timeout_s=60)
async def probe_wait(ctx: ToolContext, args: WaitArgs) -> str:
    """Pause inside a step (gives tests time to send updates or cancel)."""
    await asyncio.sleep(args.seconds)
    return f"waited {args.seconds}s"


class NoteArgs(BaseModel):
    note: str


@tool(effect="compensable", timeout_s=5, idempotent=True, workspace=True)
def flaky_undo_note(ctx: ToolContext, args: NoteArgs) -> str:
    """Write a note whose undo fails on its first attempt."""
    _append(ctx, f"note {ctx.key} {args.note}")
    return "noted"


@undo_for("flaky_undo_note")
def undo_flaky_undo_note(ctx: ToolContext, args: NoteArgs, undo: dict | None) -> str:
    if ctx.attempt == 1:
        raise RuntimeError("undo service briefly unavailable")
    _append(ctx, f"undone {ctx.key}")
    return "unnoted"


@tool(effect="compensable", timeout_s=5, idempotent=True, workspace=True)
def doomed_note(ctx: ToolContext, args: NoteArgs) -> str:
    """Write a note whose undo can never succeed."""
    _append(ctx, f"doomed {ctx.key} {args.note}")
    return "noted"


@undo_for("doomed_note")
def undo_doomed_note(ctx: ToolContext, args: NoteArgs, undo: dict | None) -> str:
    raise FatalToolError("the archive is read-only; this note cannot be removed")


@tool(effect="read_only", timeout_s=5)
def probe_fatal(ctx: ToolContext, args: NoteArgs) -> str:
    """Fail the run (non-retryable)."""
    raise FatalToolError(args.note)


BROKEN_MARKER = "BROKEN"

register_profile(
    AgentProfile(
        name="saga",
        system_prompt="You are a test agent with side effects.",
        tools=[
            "write_file",
            "read_file",
            "create_ticket",
            "probe_wait",
            "flaky_undo_note",
            "doomed_note",
            "probe_fatal",
        ],
        budget=Budget(max_steps=50),
        verifier=Verifier(
            argv=["python", "-c", f"import os,sys; sys.exit(1 if os.path.exists('{BROKEN_MARKER}') else 0)"]
        ),
        failure_policy=FailurePolicy.ROLLBACK_TO_LAST_CHECKPOINT,
    )
)


class CountArgs(BaseModel):
    items: int
    per_item_s: float = 0.2


@tool(effect="read_only", timeout_s=120, max_attempts=5, heartbeat_s=2, workspace=True)
async def long_count(ctx: ToolContext, args: CountArgs) -> str:
    """Process items one by one, heartbeating progress; a retry resumes after the last one done."""
    start = (ctx.resume_from or -1) + 1
    _append(ctx, f"attempt {ctx.attempt} starts at {start}")
    for item in range(start, args.items):
        await asyncio.sleep(args.per_item_s)
        _append(ctx, f"item {item}")
        ctx.heartbeat(item)
    return f"counted {args.items} items"


register_profile(
    AgentProfile(
        name="approver",
        system_prompt="You are a background test agent.",
        tools=["create_ticket", "probe_append", "wait", "long_count"],
        budget=Budget(max_steps=1000, max_tokens=10**10),
        approval_rules=[ApprovalRule(tool="create_ticket", argument="title", pattern="^prod")],
        approval_timeout_s=3 * 24 * 3600,
        on_approval_timeout="reject",
        continue_as_new_events=400,
    )
)

register_profile(
    AgentProfile(
        name="boss",
        system_prompt="You delegate.",
        tools=["delegate", "probe_wait", "write_file"],
        budget=Budget(max_steps=20),
        failure_policy=FailurePolicy.ROLLBACK_ALL,
    )
)

HOST_TOOLS = ["write_file", "read_file", "list_files", "create_ticket", "wait", "probe_fatal"]

register_profile(
    AgentProfile(
        name="hosts",
        system_prompt="You are a test agent on several hosts.",
        tools=HOST_TOOLS,
        budget=Budget(max_steps=40),
        verifier=Verifier(
            argv=["python", "-c", f"import os,sys; sys.exit(1 if os.path.exists('{BROKEN_MARKER}') else 0)"]
        ),
        host_timeout_s=3,
    )
)

register_profile(
    AgentProfile(
        name="hosts_plain",
        system_prompt="You are a test agent on several hosts, without checkpoints.",
        tools=HOST_TOOLS,
        budget=Budget(max_steps=40),
        host_timeout_s=3,
    )
)


class ChargeArgs(BaseModel):
    label: str
    crash_after_acting: bool = False
    not_started_first: bool = False


@tool(effect="compensable", timeout_s=5, max_attempts=3, workspace=True)
def probe_charge(ctx: ToolContext, args: ChargeArgs) -> str:
    """Charge once (not idempotent, no reconcile hook): an interrupted attempt's outcome is unknown."""
    if args.not_started_first and ctx.attempt == 1:
        raise NotStarted("the payment service refused the connection")
    log = ctx.workspace / PROBE_LOG
    first = not log.exists() or f"charged {args.label} " not in log.read_text()
    _append(ctx, f"charged {args.label} attempt {ctx.attempt}")
    if args.crash_after_acting and first:
        raise RuntimeError("connection reset after the charge was sent")
    return f"charged {args.label}"


@undo_for("probe_charge")
def undo_probe_charge(ctx: ToolContext, args: ChargeArgs, undo: dict | None) -> str:
    _append(ctx, f"refunded {args.label}")
    return "refunded"


register_profile(
    AgentProfile(
        name="decider",
        system_prompt="You are a test agent whose tool calls can be interrupted.",
        tools=["probe_charge", "read_file"],
        budget=Budget(max_steps=20),
        failure_policy=FailurePolicy.ROLLBACK_ALL,
    )
)
register_profile(
    AgentProfile(
        name="decider_skips",
        system_prompt="You are a test agent whose tool calls can be interrupted.",
        tools=["probe_charge"],
        budget=Budget(max_steps=20),
        decision_timeout_s=1,
        on_decision_timeout="skip",
    )
)


class SlowNoteArgs(BaseModel):
    note: str
    seconds: float = 30.0


@tool(effect="compensable", timeout_s=120, idempotent=True, workspace=True)
async def slow_note(ctx: ToolContext, args: SlowNoteArgs) -> str:
    """Write a note slowly: a long side effect that a rollback, a pause or the deadline interrupts.
    The log shows when it started, whether it was stopped, and when its undo ran."""
    _append(ctx, f"start {ctx.key}")
    try:
        await asyncio.sleep(args.seconds)
    except asyncio.CancelledError:
        _append(ctx, f"stopped {ctx.key}")
        raise
    _append(ctx, f"noted {ctx.key} {args.note}")
    return "noted"


@undo_for("slow_note")
def undo_slow_note(ctx: ToolContext, args: SlowNoteArgs, undo: dict | None) -> str:
    _append(ctx, f"undone {ctx.key}")
    return "unnoted"


register_profile(
    AgentProfile(
        name="control",
        system_prompt="You are a test agent that people interrupt.",
        tools=["write_file", "read_file", "slow_note", "wait", "create_ticket"],
        budget=Budget(max_steps=50),
        verifier=Verifier(
            argv=["python", "-c", f"import os,sys; sys.exit(1 if os.path.exists('{BROKEN_MARKER}') else 0)"]
        ),
        approval_rules=[ApprovalRule(tool="create_ticket", argument="title", pattern="^prod")],
    )
)

register_profile(
    AgentProfile(
        name="priced_echo",
        system_prompt="You are a test agent whose model costs money.",
        tools=["probe_echo"],
        budget=Budget(max_steps=50),
        usd_per_1k_prompt_tokens=1.0,
        usd_per_1k_completion_tokens=2.0,
    )
)

register_profile(
    AgentProfile(
        name="archivist",
        system_prompt="You are a test agent whose long runs hand over often.",
        tools=["write_file", "read_file", "wait"],
        budget=Budget(max_steps=100),
        verifier=Verifier(argv=["true"]),
        continue_as_new_events=60,
    )
)


class ReleaseArgs(BaseModel):
    broken_on: list[str] = []


@tool(effect="read_only", timeout_s=5)
def probe_release(ctx: ToolContext, args: ReleaseArgs) -> str:
    """What a bad release breaks: on a worker whose build (RATCHET_BUILD_ID) is in `broken_on` the
    tool fails the run (non-retryable); on any other build it works. Two builds of this one code
    thus behave as an old and a broken new release (tests/deploys/test_deploy_guard.py)."""
    build = ctx.settings.build_id if ctx.settings is not None else None
    if build in args.broken_on:
        raise FatalToolError(f"release check failed on build {build}")
    return f"release check passed on build {build}"


register_profile(
    AgentProfile(
        name="releaser",
        system_prompt="You are a test agent that checks its release.",
        tools=["probe_release"],
        budget=Budget(max_steps=10),
    )
)

register_profile(
    AgentProfile(
        name="notified",
        system_prompt="You open tickets; a receiver is told of approvals, checkpoints and the end.",
        tools=["create_ticket", "write_file"],
        budget=Budget(max_steps=20),
        approval_rules=[ApprovalRule(tool="create_ticket", argument="title", pattern="^prod")],
        verifier=Verifier(argv=["true"]),
        notify=[
            Notify(
                url="http://127.0.0.1:${RATCHET_TEST_NOTIFY_PORT}/events",
                events=["approval_requested", "checkpoint", "run_ended"],
                secret="${RATCHET_TEST_NOTIFY_SECRET}",
            )
        ],
    )
)
"""Webhooks out (tests/test_notify.py): the receiver's port and secret are the worker's variables."""

register_profile(
    AgentProfile(
        name="guarded",
        system_prompt="You write files and open tickets, within guardrails.",
        tools=["write_file", "create_ticket", "probe_notes"],
        budget=Budget(max_steps=20),
        failure_policy=FailurePolicy.KEEP,
        guardrails=[
            Guardrail(name="pii-in", on="input", detectors=["email"], action="redact"),
            Guardrail(name="no-drop", on="tool_call", tool="write_file", argument="content", patterns=[r"DROP TABLE"]),
            Guardrail(
                name="no-keys-in-files", on="tool_call", tool="write_file", detectors=["secret"], action="redact"
            ),
            Guardrail(
                name="customer-tickets",
                on="tool_call",
                tool="create_ticket",
                argument="title",
                patterns=[r"(?i)customer"],
                action="ask",
            ),
            Guardrail(name="no-keys-in-notes", on="tool_call", tool="probe_notes", detectors=["secret"], action="redact"),
            Guardrail(name="no-keys-out", on="answer", detectors=["secret"], action="redact"),
            Guardrail(name="no-confidential-out", on="answer", patterns=["CONFIDENTIAL"]),
        ],
    )
)
"""Guardrails (tests/test_guardrails.py): one of each place and action."""

for name, tools, targets in (
    ("triager", ["write_file", "create_ticket", "handoff"], ["fixer"]),
    ("fixer", ["write_file", "read_file", "wait", "handoff"], ["triager"]),
    ("hands_nowhere", ["read_file", "handoff"], []),
    ("asker", ["write_file", "handoff", "wait"], ["fixer", "person:alice", "role:reviewers"]),
    ("asks_nobody", ["read_file", "handoff"], ["person:"]),
):
    register_profile(
        AgentProfile(
            name=name,
            system_prompt=f"You are the {name}.",
            tools=tools,
            handoffs=targets,
            budget=Budget(max_steps=30, max_tokens=10**9),
            verifier=Verifier(argv=["true"]),
        )
    )
"""Handoffs (tests/workflows/test_handoffs.py): a triager hands to a fixer, which may hand back;
`hands_nowhere` offers the tool with no target (a profile the worker refuses to plan); `asker` hands
to a person's inbox (tests/workflows/test_person_handoffs.py), `asks_nobody` to an inbox with no name."""

register_profile(
    AgentProfile(
        name="schema_guarded",
        system_prompt="You open tickets and answer in JSON.",
        tools=["create_ticket"],
        budget=Budget(max_steps=20),
        guardrails=[
            Guardrail(
                name="short-titles",
                on="tool_call",
                tool="create_ticket",
                json_schema={"properties": {"title": {"maxLength": 20}}},
                action="ask",
            ),
            Guardrail(name="json-answer", on="answer", json_schema={"type": "object", "required": ["status"]}),
        ],
    )
)
register_profile(
    AgentProfile(
        name="bad_schema",
        system_prompt="x",
        tools=["create_ticket"],
        guardrails=[Guardrail(name="broken", on="answer", json_schema={"type": 5})],
    )
)
"""JSON Schema guardrails (tests/workflows/test_guardrails.py); `bad_schema`'s does not compile."""


def _judge(verdict: str, question: str) -> Judge:
    return Judge(provider="scripted", options={"script": [{"content": verdict}]}, question=question)


for name, verdict in (("judged", "FAIL"), ("judged_pass", "PASS")):
    register_profile(
        AgentProfile(
            name=name,
            system_prompt="You open tickets.",
            tools=["create_ticket"],
            budget=Budget(max_steps=20),
            guardrails=[
                Guardrail(
                    name="ticket-review",
                    on="tool_call",
                    tool="create_ticket",
                    action="ask",
                    judge=_judge(f"{verdict}: the title names a customer", "Does the ticket name a customer?"),
                ),
                Guardrail(
                    name="no-refunds",
                    on="answer",
                    judge=_judge(f"{verdict}: it promises a refund", "Does the answer promise a refund?"),
                ),
            ],
        )
    )
"""Judge guardrails (tests/workflows/test_guardrails.py): a scripted judge that always fails, one that passes."""
