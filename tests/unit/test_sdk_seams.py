"""The SDK's private members Ratchet uses (workflows/sdk_seams.py), checked on the installed
temporalio: an upgrade that renames, removes or stops calling one fails here, not in a run. And no
other module uses one."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import logging
import re
from pathlib import Path

import temporalio.worker._workflow_instance as workflow_instance
from temporalio import activity
from temporalio.contrib.workflow_streams import PollInput, PollResult, WorkflowStream, WorkflowStreamState, _stream

from ratchet.contracts import AGENT_WORKFLOW
from ratchet.contracts.activities import MODEL_CALL
from ratchet.workflows import sdk_seams
from ratchet.workflows.agent import AgentWorkflow
from ratchet.workflows.sdk_seams import OFFSET_QUERY, ObservedStream, activity_name, workflow_name

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("ratchet", "workflows", "activities", "worker")


def test_the_stream_registers_the_poll_method_it_overrides_and_the_offset_query_it_reads():
    init = inspect.getsource(WorkflowStream.__init__)
    assert re.search(r"set_update_handler\(\s*_POLL,\s*self\._on_poll\b", init), "the poll handler is looked up on self"
    assert _stream._OFFSET_QUERY == OFFSET_QUERY
    assert re.search(r"set_query_handler\(\s*_OFFSET_QUERY,", init)


def test_the_overridden_poll_has_the_signature_it_overrides():
    base, ours = WorkflowStream._on_poll, ObservedStream._on_poll
    assert inspect.iscoroutinefunction(base) and inspect.iscoroutinefunction(ours)
    assert list(inspect.signature(base).parameters) == list(inspect.signature(ours).parameters) == ["self", "payload"]
    hints = inspect.get_annotations(base, eval_str=True)
    assert hints["payload"] is PollInput and hints["return"] is PollResult


def test_the_public_parts_the_stream_relies_on_are_there():
    assert list(inspect.signature(WorkflowStream.truncate).parameters) == ["self", "up_to_offset"]
    assert "base_offset" in {f.name for f in dataclasses.fields(WorkflowStreamState)}
    assert 'caller_name != "__init__"' in inspect.getsource(WorkflowStream.__init__), "ObservedStream is made in one"


def test_definition_names_are_read_as_the_sdk_reads_them():
    assert workflow_name(AgentWorkflow) == AGENT_WORKFLOW
    assert workflow_name(object) is None
    try:
        workflow_name(object, required=True)
    except ValueError:
        pass
    else:
        raise AssertionError("a class that is not a workflow is refused when required")

    @activity.defn(name=MODEL_CALL.name)
    async def stand_in() -> None: ...

    assert activity_name(stand_in) == MODEL_CALL.name
    assert activity_name(len) is None


def test_the_workflow_task_logger_is_the_one_that_logs_failed_tasks():
    assert workflow_instance.logger.name == sdk_seams.WORKFLOW_TASK_LOGGER
    assert workflow_instance.logger is logging.getLogger(sdk_seams.WORKFLOW_TASK_LOGGER)
    assert "Failed activation" in inspect.getsource(workflow_instance)


def _private_touches(path: Path) -> list[str]:
    """`temporalio..._x` names and `from temporalio... import _x` in a module's source."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("temporalio"):
            found += [f"{node.module}.{a.name}" for a in node.names if a.name.startswith("_")]
            if "._" in f".{node.module}":
                found.append(node.module or "")
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.startswith("temporalio") and "._" in a.name]
        elif isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            base = ast.unparse(node.value)
            if base.startswith("temporalio") or node.attr in {"_on_offset", "_base_offset", "_on_poll"}:
                found.append(f"{base}.{node.attr}")
            if node.attr.startswith(("_transform_", "_schema_serializer", "_Definition")):
                found.append(f"{base}.{node.attr}")
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and re.match(r"temporalio[\w.]*\._", node.value)
        ):
            found.append(node.value)
    return [f"{path.relative_to(ROOT)}: {name}" for name in found]


def test_no_other_module_touches_a_private_member_of_the_sdk():
    seams = ROOT / "workflows" / "sdk_seams.py"
    found = [
        touch
        for top in SOURCES
        for path in sorted((ROOT / top).rglob("*.py"))
        if path != seams and "__pycache__" not in path.parts
        for touch in _private_touches(path)
    ]
    assert not found, "private SDK members belong in workflows/sdk_seams.py:\n" + "\n".join(found)
    assert _private_touches(seams), "the check finds the touches where they are"
