"""A start the workflow cannot accept fails the run at once as InvalidInput, never the workflow
task (which Temporal would retry forever): here, two `--input` values from the plain Temporal CLI."""

from __future__ import annotations

import json
import uuid

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError

from ratchet.contracts import AGENT_WORKFLOW, ErrorType
from ratchet.payloads.converter import BASE_CONVERTER
from ratchet.replay.outcomes import OK
from ratchet.replay.replayer import Loaded, replay
from tests.runs import scripted, temporal_cli


async def test_two_inputs_from_the_temporal_cli_fail_the_run_as_invalid_input(client, dev_server, settings, worker):
    wid = f"two-inputs-{uuid.uuid4().hex[:8]}"
    run = json.dumps(scripted("probe", [{"content": "never"}]))
    code, out = await temporal_cli(
        dev_server.address, "workflow", "start", "--type", AGENT_WORKFLOW, "--task-queue", settings.task_queue,
        "--workflow-id", wid, "--input", run, "--input", run, "--execution-timeout", "20s",
    )
    assert code == 0, out
    handle = client.get_workflow_handle(wid)
    with pytest.raises(WorkflowFailureError) as failed:
        await handle.result()
    failure = failed.value.cause
    assert isinstance(failure, ApplicationError)
    assert failure.type == ErrorType.INVALID_INPUT and failure.non_retryable
    assert "AgentWorkflow takes 1 input, got 2" in failure.message
    history = await handle.fetch_history()
    assert not any(e.HasField("workflow_task_failed_event_attributes") for e in history.events)
    [outcome] = await replay([Loaded(wid, history)], BASE_CONVERTER)
    assert outcome.result == OK, outcome  # the replay gate applies the worker's start guard too

