"""`RunHandle` beyond the surfaces' scenario (tests/client/test_client_surfaces.py): what Temporal knows of
a run (`describe`, `history`), ending it at once (`terminate`), and how `result()` says a run did
not end DONE (RunCancelled, RunFailed), against the dev server."""

from __future__ import annotations

import uuid

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowExecutionStatus

from ratchet.client import RunCancelled, RunFailed, RunNotFound
from ratchet.contracts import Phase
from tests.runs import runs, scripted, start, wait_for

WAIT = [{"tool_calls": [{"name": "probe_wait", "arguments": {"seconds": 60}}]}, {"content": "never"}]


async def test_describe_and_history_show_the_run_as_temporal_recorded_it(client, settings, worker):
    run = await start(client, settings, scripted("probe", [{"content": "done"}]))
    assert (await run.result()).phase == Phase.DONE
    assert (await run.describe()).status == WorkflowExecutionStatus.COMPLETED and not await run.running()
    events = (await run.history()).events
    assert events[0].event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED
    assert events[-1].event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED


async def test_a_cancelled_run_is_run_cancelled_and_a_terminated_one_run_failed(client, settings, worker):
    cancelled = await start(client, settings, scripted("saga", WAIT))
    terminated = await start(client, settings, scripted("saga", WAIT))
    for run in (cancelled, terminated):
        await wait_for(run, lambda s: s.step == 1 and s.phase == Phase.ACTING)
    await cancelled.cancel()
    await terminated.terminate("no longer wanted")
    with pytest.raises(RunCancelled):
        await cancelled.result()
    with pytest.raises(RunFailed) as failed:
        await terminated.result()
    assert not isinstance(failed.value, RunCancelled) and "no longer wanted" in failed.value.reason
    assert (await cancelled.state()).phase == Phase.CANCELLED
    assert (await terminated.describe()).status == WorkflowExecutionStatus.TERMINATED


async def test_a_handle_from_start_waits_for_its_own_run_and_get_for_the_latest(client, settings, worker):
    workflow_id = f"reused-{uuid.uuid4().hex[:8]}"
    first = await start(client, settings, scripted("probe", [{"content": "first"}]), workflow_id)
    assert (await first.result()).answer == "first"
    second = await start(client, settings, scripted("probe", [{"content": "second"}]), workflow_id, new_run=True)
    assert (await second.result()).answer == "second"
    assert (await first.result()).answer == "first", "the execution it started, not the newest"
    assert (await runs(client, settings).get(workflow_id).result()).answer == "second"


async def test_history_describe_and_terminate_of_a_missing_run_are_run_not_found(client, settings):
    missing = runs(client, settings).get(f"missing-{uuid.uuid4().hex[:8]}")
    for call in (missing.history, missing.describe, lambda: missing.terminate("x")):
        with pytest.raises(RunNotFound):
            await call()


async def test_a_service_that_stopped_answering_is_unavailable(settings, tmp_path):
    from temporalio.client import Client

    from devtools.devserver import DevServer
    from ratchet.client import RatchetClient, Unavailable

    server = DevServer(db_file=tmp_path / "temporal.db", log_file=tmp_path / "server.log")
    server.start()
    try:
        run = RatchetClient(await Client.connect(server.address), settings).get("any")
        with pytest.raises(RunNotFound):
            await run.describe()
    finally:
        server.stop()
    with pytest.raises(Unavailable) as unavailable:
        await run.describe()
    assert str(unavailable.value).startswith(f"cannot reach Temporal at {server.address} ("), unavailable.value
    assert "tcp connect error" not in str(unavailable.value), unavailable.value
