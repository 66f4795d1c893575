"""A namespace without Ratchet's search attributes (a plain `temporal server start-dev`): the worker
registers them at start instead of leaving every run to hang on its first upsert, and the commands
we print (and document) for a cluster register all of them on the real CLI."""

from __future__ import annotations

import asyncio
import re
import shlex
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
from temporalio.client import Client
from temporalio.common import SearchAttributeKey

import ratchet.client
from devtools.devserver import DevServer, temporal_binary
from ratchet.client import InvalidInput
from ratchet.contracts import AGENT_WORKFLOW, AgentResult, Phase, RunAttributes
from ratchet.ops.search_attributes import SEARCH_ATTRIBUTES, register_commands
from ratchet.payloads.converter import BASE_CONVERTER
from ratchet.worker.main import build_worker
from ratchet.workflows import visibility
from tests.runs import runs, scripted, start, until, wait_for


async def _custom(client: Client) -> dict:
    listed = await client.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace=client.namespace)
    )
    return dict(listed.custom_attributes)


def test_the_list_is_what_the_workflow_publishes():
    published = {v.name for v in vars(visibility).values() if isinstance(v, SearchAttributeKey)}
    assert published == set(SEARCH_ATTRIBUTES)


def test_the_workflow_publishes_each_declared_attribute_with_its_declared_type():
    published = {
        v.name: v.indexed_value_type.name for v in vars(visibility).values() if isinstance(v, SearchAttributeKey)
    }
    assert published == {a.name: a.type.name for a in RunAttributes.ALL}  # KEYWORD, BOOL, INT, DOUBLE


def test_the_client_names_attributes_only_through_the_contracts():
    """ratchet/client reads and filters by `RunAttributes`, never by a name spelled again."""
    client = Path(ratchet.client.__file__).parent
    named = {n for p in client.glob("*.py") for n in re.findall(r"[\"'](Ratchet[A-Z][A-Za-z]*)", p.read_text())}
    named = {n for n in named if not hasattr(ratchet.client, n)}  # RatchetClient, RatchetError: classes
    assert not named, f"spelled in ratchet/client instead of RunAttributes: {sorted(named)}"
    used = {a for a in RunAttributes.ALL for p in client.glob("*.py") if f"RunAttributes.{_member(a)}" in p.read_text()}
    assert len(used) == len(RunAttributes.ALL)  # the listing reads every one


def _member(attribute) -> str:
    return next(k for k, v in vars(RunAttributes).items() if v is attribute)


async def test_a_worker_registers_missing_search_attributes_so_runs_do_not_hang(tmp_path, settings):
    with DevServer(db_file=tmp_path / "plain.db", search_attributes=False) as plain:
        client = await Client.connect(plain.address, data_converter=BASE_CONVERTER)
        assert not set(SEARCH_ATTRIBUTES) & set(await _custom(client))
        ours = settings.model_copy(update={"temporal_address": plain.address})
        # before any worker registered them: a run starts without its agent and phase (it upserts them),
        # a tenant's run, whose limit needs its attribute at the start, is refused saying what to do
        early = await start(client, ours, scripted("probe", [{"content": "ok"}]))
        with pytest.raises(InvalidInput, match="start a worker once .*RATCHET_SEARCH_ATTRIBUTES=false"):
            await start(client, ours, scripted("probe", [{"content": "ok"}], tenant="acme"))
        async with build_worker(client, ours, graceful_shutdown_timeout=timedelta(0)):
            handle = await start(client, ours, scripted("probe", [{"content": "ok"}]))
            result = await asyncio.wait_for(handle.result(), timeout=30)
            assert (await asyncio.wait_for(early.result(), timeout=30)).phase == Phase.DONE
        assert result.phase == Phase.DONE
        assert set(SEARCH_ATTRIBUTES) <= set(await _custom(client))


async def test_the_printed_commands_register_every_attribute(tmp_path):
    with DevServer(db_file=tmp_path / "plain.db", search_attributes=False) as plain:
        for command in register_commands("default"):
            argv = shlex.split(command)
            assert argv[0] == "temporal"
            proc = await asyncio.create_subprocess_exec(
                temporal_binary(),
                *argv[1:],
                "--address",
                plain.address,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
            )
            out, _ = await proc.communicate()
            assert proc.returncode == 0, out.decode()
        client = await Client.connect(plain.address)
        assert set(SEARCH_ATTRIBUTES) <= set(await _custom(client))


async def test_a_cancelled_run_shows_cancelled_in_visibility(client, settings, worker):
    """`ratchet list` after `ratchet cancel`: the phase attribute tells how the run ended, not RUNNING."""
    from ratchet.client import RatchetClient, RunCancelled

    runs = RatchetClient(client, settings)
    run = await runs.start(
        scripted("approver", [{"tool_calls": [{"name": "wait", "arguments": {"seconds": 600}}]}, {"content": "never"}])
    )
    await wait_for(run, lambda s: s.phase == Phase.ACTING)
    await run.cancel()
    with pytest.raises(RunCancelled):
        await run.result()

    async def cancelled_listed():  # visibility is eventually consistent
        [listed] = await runs.list(agent="approver", query=f'WorkflowId="{run.workflow_id}"')
        return listed if listed.phase == "CANCELLED" else None

    listed = await until(cancelled_listed, "the run listed CANCELLED")
    assert listed.status == "CANCELED"


async def test_a_run_that_fails_while_being_planned_shows_its_agent_and_failed(client, settings, worker):
    """An unknown profile fails the run in run.prepare, before it has a plan: visibility still
    shows its agent and FAILED (run.prepare's failure says the worker publishes them)."""
    from ratchet.client import RatchetClient, RunFailed

    runs = RatchetClient(client, settings)
    run = await runs.start({"agent": "nobody-here", "objective": "x"})
    try:
        await asyncio.wait_for(run.result(), 30)
        raise AssertionError("the run should fail")
    except RunFailed as failed:
        assert "nobody-here" in failed.reason
    assert (await run.state()).phase == Phase.FAILED

    async def failed_listed():  # visibility is eventually consistent
        listed = await runs.list(query=f'WorkflowId="{run.workflow_id}"')
        return listed if listed and listed[0].phase == "FAILED" else None

    listed = await until(failed_listed, "the run listed FAILED")
    assert listed[0].agent == "nobody-here" and listed[0].status == "FAILED"


async def test_a_run_shows_its_agent_from_its_start_and_upserts_only_what_changed(client, settings, worker):
    """A start through ratchet.client sets the run's agent, RUNNING and no approval: a run no worker
    has taken yet is listed by its agent, and a plain run upserts only its build and its end. A start that sets
    none (the raw SDK's, `temporal workflow start`'s) gets them from the run's first upsert."""
    queued = settings.model_copy(update={"task_queue": f"nobody-{uuid.uuid4().hex[:8]}"})  # no worker polls it
    waiting = await start(client, queued, scripted("probe", [{"content": "never"}]))

    async def listed_running():
        listed = await runs(client, queued).list(agent="probe", query=f'WorkflowId="{waiting.workflow_id}"')
        return listed if listed and listed[0].phase == "RUNNING" else None

    await until(listed_running, "the run no worker took listed by its agent, RUNNING")
    await waiting.terminate("no worker polls its queue")

    plain = await start(client, settings, scripted("probe", [{"content": "done"}]))
    await plain.result()
    upserts = [
        e
        for e in (await plain.history()).events
        if e.event_type == EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES
    ]
    named = [
        set(u.upsert_workflow_search_attributes_event_attributes.search_attributes.indexed_fields) for u in upserts
    ]
    assert not any({RunAttributes.AGENT.name, RunAttributes.AWAITING_APPROVAL.name} & n for n in named)
    assert named[-1] == {RunAttributes.PHASE.name, RunAttributes.STEPS.name, RunAttributes.COST.name}  # the end
    assert all(n == {RunAttributes.BUILD.name} for n in named[:-1])  # a versioned worker's build, if any

    raw = await client.start_workflow(
        AGENT_WORKFLOW,
        scripted("probe", [{"content": "done"}]),
        id=f"raw-{uuid.uuid4().hex[:8]}",
        task_queue=settings.task_queue,
        result_type=AgentResult,
    )
    await raw.result()
    [listed] = await until(
        lambda: runs(client, settings).list(
            agent="probe", query=f'WorkflowId="{raw.id}" AND {RunAttributes.PHASE}="DONE"'
        ),
        "the raw start listed by its agent, DONE",
    )
    assert listed.workflow_id == raw.id


async def test_a_run_started_showing_running_shows_its_end_on_a_worker_that_publishes_nothing(client, settings):
    """A client with RATCHET_SEARCH_ATTRIBUTES on starts the run showing its agent and RUNNING; a
    worker with it off publishes none of its own, yet what the run shows from its start is kept
    true: its end is upserted, so it is not listed RUNNING once closed."""
    silent = settings.model_copy(update={"search_attributes": False})
    async with build_worker(client, silent, graceful_shutdown_timeout=timedelta(0)):
        handle = await start(client, settings, scripted("probe", [{"content": "done"}]))
        assert (await handle.result()).phase == Phase.DONE
    [listed] = await until(
        lambda: runs(client, settings).list(
            agent="probe", query=f'WorkflowId="{handle.workflow_id}" AND {RunAttributes.PHASE}="DONE"'
        ),
        "the run listed DONE",
    )
    assert listed.status == "COMPLETED"
    upserts = [
        e
        for e in (await handle.history()).events
        if e.event_type == EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES
    ]
    assert upserts, "the run's end is upserted"
