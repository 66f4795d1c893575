"""Loading histories and replaying them with temporalio's `Replayer` (for `ratchet replay`).

Histories come from JSON files as `temporal workflow show --output json` exports them (the
SDK's `WorkflowHistory.to_json` form loads too) or from a server's visibility query. Replay uses
the worker's data converter (ratchet/converter.py), so RATCHET_CODEC_KEYS must match the
worker's. A failing history is then bisected to the agent step where it diverges.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from temporalio.api.common.v1 import Payload
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import WorkflowHistory
from temporalio.converter import DataConverter
from temporalio.runtime import LoggingConfig, Runtime, TelemetryConfig, TelemetryFilter
from temporalio.worker import Replayer
from temporalio.workflow import NondeterminismError

from ratchet.divergence import locate
from ratchet.replay import ERROR, FAILED, NONDETERMINISTIC, OK, Outcome, Progress
from ratchet.settings import Settings

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
        return Outcome(path.stem, str(path), result=ERROR, detail=f"{path} is not a JSON history: {_one_line(str(exc))}")
    started = history.events[0].workflow_execution_started_event_attributes
    return Loaded(str(path), WorkflowHistory(started.workflow_id or path.stem, history.events))


async def server_histories(settings: Settings, query: str, limit: int, progress: Progress) -> list[Loaded | Outcome]:
    """Histories of the runs matching a visibility query (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE)."""
    from worker.main import connect

    progress(f"listing runs on {settings.temporal_address} ({settings.temporal_namespace}): {query}")
    found: list[Loaded | Outcome] = []
    try:
        client = await connect(settings)
        async for execution in client.list_workflows(query, limit=limit):
            handle = client.get_workflow_handle(execution.id, run_id=execution.run_id)
            found.append(Loaded(f"run {execution.run_id}", await handle.fetch_history()))
    except Exception as exc:  # connection, query syntax, permissions: the tool failed, not the code
        found.append(Outcome("-", "server", result=ERROR, detail=f"server: {type(exc).__name__}: {_one_line(str(exc))}"))
    if not found:
        found.append(Outcome("-", "server", result=ERROR, detail=f"no runs match {query}"))
    return found


async def replay(
    items: Sequence[Loaded | Outcome],
    converter: DataConverter,
    workflows: Sequence[type] | None = None,
    progress: Progress | None = None,
) -> list[Outcome]:
    """A verdict per loaded history, in order; loading errors pass through."""
    replayer = Replayer(
        workflows=list(workflows or _default_workflows()), data_converter=converter, runtime=_quiet_runtime()
    )
    loaded = [item for item in items if isinstance(item, Loaded)]
    verdicts: dict[int, Outcome] = {}
    for n, item in enumerate(loaded, 1):
        verdicts[id(item)] = outcome = await _replay_one(replayer, converter, item)
        if progress:
            progress(f"[{n}/{len(loaded)}] {outcome.workflow_id}: {_short(outcome)}")
    return [verdicts[id(item)] if isinstance(item, Loaded) else item for item in items]


async def _replay_one(replayer: Replayer, converter: DataConverter, item: Loaded) -> Outcome:
    events = item.history.events
    outcome = Outcome(item.history.workflow_id, item.source, events=len(events))
    problem = await _undecodable_input(converter, item.history)
    if problem:
        outcome.result, outcome.detail = ERROR, problem
        return outcome
    failure = await _failure(replayer, item.history)
    if failure is None:
        return outcome
    outcome.result = NONDETERMINISTIC if isinstance(failure, NondeterminismError) else FAILED
    outcome.detail = _reason(failure)

    async def fails(prefix: Sequence[HistoryEvent]) -> bool:
        return await _failure(replayer, WorkflowHistory(item.history.workflow_id, prefix)) is not None

    async def decode(payload: Payload) -> Any:
        try:
            return (await converter.decode([payload]))[0]
        except Exception:  # an undecodable payload only costs the label its step
            return None

    outcome.divergence = await locate(events, str(failure), fails, decode)
    return outcome


async def _undecodable_input(converter: DataConverter, history: WorkflowHistory) -> str | None:
    """Encrypted payloads without the keys would replay as a bogus divergence: say so instead."""
    payloads = history.events[0].workflow_execution_started_event_attributes.input.payloads
    try:
        await converter.decode(list(payloads))
    except Exception as exc:
        hint = "" if converter.payload_codec else "; set RATCHET_CODEC_KEYS as on the worker"
        return f"cannot decode the run's input: {_one_line(str(exc))}{hint}"
    return None


async def _failure(replayer: Replayer, history: WorkflowHistory) -> Exception | None:
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    return result.replay_failure


def _default_workflows() -> list[type]:
    from workflows.agent import AgentWorkflow

    return [AgentWorkflow]


@cache
def _quiet_runtime() -> Runtime:
    """Core logs each replay failure as a warning; the table reports them instead."""
    quiet = TelemetryFilter(core_level="ERROR", other_level="ERROR")
    return Runtime(telemetry=TelemetryConfig(logging=LoggingConfig(filter=quiet)))


def _reason(failure: Exception) -> str:
    """Core's message out of its `Failure { failure: Some(Failure { message: "..." ...` dump."""
    text = str(failure)
    found = _CORE_MESSAGE.search(text)
    return _one_line(found.group(1).encode().decode("unicode_escape") if found else text)


def _one_line(text: str, limit: int = 300) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _short(outcome: Outcome) -> str:
    if outcome.result == OK:
        return f"ok ({outcome.events} events)"
    if outcome.result == ERROR:
        return f"ERROR: {outcome.detail}"
    return f"{outcome.result} at {outcome.divergence}: {outcome.detail}"
