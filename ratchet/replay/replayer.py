"""Loading histories and replaying them with temporalio's `Replayer` (for `ratchet replay`).

Histories come from JSON files as `temporal workflow show --output json` exports them (the
SDK's `WorkflowHistory.to_json` form loads too) or from a server's visibility query. Replay uses
the worker's data converter (ratchet/payloads/converter.py); every payload is decoded first, so missing
keys (RATCHET_CODEC_KEYS) or offloaded payloads' blobs (RATCHET_ARTIFACT_DIR) are an ERROR, not a false
divergence. A failing history is then bisected to the agent step where it diverges.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from google.protobuf.message import Message
from temporalio.api.common.v1 import Payload
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import WorkflowHistory
from temporalio.converter import DataConverter
from temporalio.runtime import LoggingConfig, Runtime, TelemetryConfig, TelemetryFilter
from temporalio.worker import Replayer
from temporalio.workflow import NondeterminismError

from ratchet.payloads.converter import decode_payloads
from ratchet.replay.divergence import locate
from ratchet.replay.outcomes import ERROR, FAILED, NONDETERMINISTIC, OK, Outcome, Progress
from ratchet.ops.settings import Settings
from ratchet.start_guard import StartGuard
from ratchet.workflows.sdk_seams import workflow_name

_CORE_MESSAGE = re.compile(r'message: "((?:[^"\\]|\\.)*)"')


@dataclass
class Loaded:
    source: str
    history: WorkflowHistory


def history_files(paths: Sequence[str | Path]) -> list[Path]:
    """Files as given; folders expanded to their *.json files, sorted."""
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        found.extend(sorted(path.rglob("*.json")) if path.is_dir() else [path])
    return found


def load_file(path: Path) -> Loaded | Outcome:
    try:
        history = WorkflowHistory.from_json(path.stem, json.loads(path.read_text()))
        if not history.events:
            raise ValueError("the history has no events")
    except (OSError, UnicodeDecodeError) as exc:
        return Outcome(path.stem, str(path), result=ERROR, detail=f"cannot read {path}: {exc}")
    except Exception as exc:  # JSON and protobuf parse errors alike: not a history
        return Outcome(
            path.stem, str(path), result=ERROR, detail=f"{path} is not a JSON history: {_one_line(str(exc))}"
        )
    started = history.events[0].workflow_execution_started_event_attributes
    return Loaded(str(path), WorkflowHistory(started.workflow_id or path.stem, history.events))


async def server_histories(settings: Settings, query: str, limit: int, progress: Progress) -> list[Loaded | Outcome]:
    """Histories of the runs matching a visibility query (the Temporal connection of `settings`:
    TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, ... or TEMPORAL_CONFIG_FILE / TEMPORAL_PROFILE)."""
    from ratchet.plugin import connect

    found: list[Loaded | Outcome] = []
    try:
        client = await connect(settings)
        progress(f"listing runs on {client.service_client.config.target_host} ({client.namespace}): {query}")
        async for execution in client.list_workflows(query, limit=limit):
            handle = client.get_workflow_handle(execution.id, run_id=execution.run_id)
            found.append(Loaded(f"run {execution.run_id}", await handle.fetch_history()))
    except Exception as exc:  # connection, query syntax, permissions: the tool failed, not the code
        from ratchet.ops.connection import TemporalUnreachable

        what = "" if isinstance(exc, TemporalUnreachable) else f"{type(exc).__name__}: "
        found.append(Outcome("-", "server", result=ERROR, detail=f"server: {what}{_one_line(str(exc))}"))
    if not found:
        progress(f"no runs match {query}")
    return found


async def replay(
    items: Sequence[Loaded | Outcome],
    converter: DataConverter,
    workflows: Sequence[type] | None = None,
    progress: Progress | None = None,
) -> list[Outcome]:
    """A verdict per loaded history, in order; loading errors pass through."""
    workflows = list(workflows or _default_workflows())
    replayer = Replayer(  # with the worker's start guard: a start it refused replays as refused
        workflows=workflows,
        data_converter=converter,
        runtime=_quiet_runtime(),
        interceptors=[StartGuard(workflows)],
    )
    named = [workflow_name(w, required=True) for w in workflows]  # the SDK's reading of @workflow.defn
    names = {name for name in named if name is not None}  # None: a dynamic workflow
    total = sum(isinstance(item, Loaded) for item in items)
    outcomes: list[Outcome] = []
    done = 0
    for item in items:
        if isinstance(item, Loaded):
            item = await _replay_one(replayer, converter, names, item)
            done += 1
            if progress:
                progress(f"[{done}/{total}] {item.workflow_id}: {_short(item)}")
        outcomes.append(item)
    return outcomes


async def _replay_one(replayer: Replayer, converter: DataConverter, names: set[str], item: Loaded) -> Outcome:
    outcome = Outcome(item.history.workflow_id, item.source, events=len(item.history.events))
    problem = _foreign(item.history, names) or await _undecodable_input(converter, item.history)
    if problem:
        outcome.result, outcome.detail = ERROR, problem
        return outcome
    failure = await _failure(replayer, item.history)
    if failure is None:
        return outcome
    outcome.result = NONDETERMINISTIC if isinstance(failure, NondeterminismError) else FAILED
    outcome.detail = _reason(failure)
    outcome.divergence = await _locate(replayer, converter, item.history, failure)
    return outcome


async def _locate(replayer: Replayer, converter: DataConverter, history: WorkflowHistory, failure: Exception) -> str:
    async def fails(prefix: Sequence[HistoryEvent]) -> bool:
        return await _failure(replayer, WorkflowHistory(history.workflow_id, prefix)) is not None

    async def decode(payload: Payload) -> Any:
        try:
            return (await converter.decode([payload]))[0]
        except Exception:  # an undecodable payload only costs the label its step
            return None

    return await locate(history.events, str(failure), fails, decode)


def _foreign(history: WorkflowHistory, names: set[str]) -> str | None:
    name = history.events[0].workflow_execution_started_event_attributes.workflow_type.name
    return None if name in names else f"workflow type {name!r} is not replayed here (only {', '.join(sorted(names))})"


async def _undecodable_input(converter: DataConverter, history: WorkflowHistory) -> str | None:
    """A history this process cannot decode (encrypted without the keys, offloaded payloads without
    the artifact store) would replay as a bogus divergence: an ERROR that says why instead."""
    payloads = [p for event in history.events for p in payloads_in(event)]
    try:
        await decode_payloads(converter, payloads)
        await converter.decode(list(history.events[0].workflow_execution_started_event_attributes.input.payloads))
    except Exception as exc:
        return (
            f"cannot decode the history: {_one_line(str(exc))} "
            "(replay needs the worker's RATCHET_CODEC_KEYS and RATCHET_ARTIFACT_DIR)"
        )
    return None


def payloads_in(message: Message) -> list[Payload]:
    """Every Payload inside a protobuf message (inputs, results, markers, failure attributes)."""
    if isinstance(message, Payload):
        return [message]
    found: list[Payload] = []
    for field, value in message.ListFields():
        if field.message_type is None:
            continue
        if isinstance(value, Message):
            value = [value]
        elif hasattr(value, "values"):  # a map field
            value = value.values()
        found.extend(p for item in value if isinstance(item, Message) for p in payloads_in(item))
    return found


async def _failure(replayer: Replayer, history: WorkflowHistory) -> Exception | None:
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    return result.replay_failure


def _default_workflows() -> list[type]:
    from ratchet.workflows.agent import AgentWorkflow
    from ratchet.workflows.closed_rollback import RollbackWorkflow

    return [AgentWorkflow, RollbackWorkflow]


@cache
def _quiet_runtime() -> Runtime:
    """Core logs each replay failure as a warning; the table reports them instead."""
    quiet = TelemetryFilter(core_level="ERROR", other_level="ERROR")
    return Runtime(telemetry=TelemetryConfig(logging=LoggingConfig(filter=quiet)))


def _reason(failure: Exception) -> str:
    """Core's message out of its `Failure { failure: Some(Failure { message: "..." ...` dump."""
    text = str(failure)
    found = _CORE_MESSAGE.search(text)
    return _one_line(found.group(1).replace('\\"', '"') if found else text)


def _one_line(text: str, limit: int = 300) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _short(outcome: Outcome) -> str:
    if outcome.result == OK:
        return f"ok ({outcome.events} events)"
    if outcome.result == ERROR:
        return f"ERROR: {outcome.detail}"
    return f"{outcome.result} at {outcome.divergence}: {outcome.detail}"
