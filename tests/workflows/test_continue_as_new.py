"""Continue-as-new on a dev server that suggests it early: state, budget and signals survive."""

from __future__ import annotations

import json
import uuid
from collections import Counter

import pytest
from temporalio.client import Client

from devtools.devserver import DevServer
from ratchet.contracts import STATE_VERSION, AgentResult, AgentState, Phase
from ratchet.payloads.converter import BASE_CONVERTER
from ratchet.stores import transcripts
from ratchet.stores.artifacts import DirectoryArtifactStore
from ratchet.worker.main import build_worker
from ratchet.workflows.handover import KEEP_TOOL_CALLS
from tests.runs import ratchet, scripted, start, wait_for

pytestmark = pytest.mark.e2e  # slow: `make test-e2e`, not `make test`

SUGGEST_AT = 600
STEPS = 300
"""Long enough for Temporal to suggest continue-as-new at least twice (about 160 steps a run)."""


@pytest.fixture(scope="module")
def early_server(tmp_path_factory):
    state = tmp_path_factory.mktemp("temporal-can")
    server = DevServer(
        db_file=state / "temporal.db", log_file=state / "server.log",
        dynamic_config={"limit.historyCount.suggestContinueAsNew": str(SUGGEST_AT)},
    )
    with server:
        yield server


def steps(n: int) -> list[dict]:
    return [{"tool_calls": [{"name": "probe_append", "arguments": {"label": str(i)}}]} for i in range(n)] + [
        {"content": f"{n} steps done"}
    ]


async def run_long(
    early_server, settings, agent: str, n: int, signals: int = 0, after=None,
) -> tuple[AgentResult, AgentState, list]:
    """`after(handle)` runs once the run is done, while the worker still answers queries."""
    client = await Client.connect(early_server.address, data_converter=BASE_CONVERTER)
    settings = settings.model_copy(update={"temporal_address": early_server.address, "max_cached_workflows": 50})
    async with build_worker(client, settings):
        run = scripted(agent, steps(n), workspace="long", budget={"max_steps": n + 1, "max_tokens": 10**10})
        handle = await start(client, settings, run, f"can-{uuid.uuid4().hex[:8]}")
        for i in range(signals):  # spread over the run, across handovers
            await wait_for(handle, lambda s, i=i: s.used.steps >= i * n // (signals + 1), timeout=120)
            await handle.send(f"note {i}")
        result = await handle.result()
        if after is not None:
            await after(handle)
        state = await handle.state()
        history = await handle.history()  # of the last run of the chain
        return result, state, history.events


async def test_suggested_continue_as_new_keeps_state_budget_and_signals(early_server, settings):
    result, state, events = await run_long(early_server, settings, "probe", STEPS, signals=20)
    assert result.phase == Phase.DONE and result.answer == f"{STEPS} steps done"
    assert state.continued >= 2
    assert len(events) < SUGGEST_AT + 100, "the current run's history stays near the bound"
    assert state.used.steps == STEPS + 1 and state.used.tool_calls == STEPS
    keys = [r.key for r in state.calls.tool_calls.items]
    assert len(keys) == len(set(keys)) and state.calls.tool_calls.base + len(keys) == STEPS
    assert keys[-1].endswith(f"/{STEPS}/call_{STEPS}_0")
    # the handover carried only the recent part; the whole conversation is in the transcript artifact
    transcript = [m.model_dump() for m in transcripts.read_all(DirectoryArtifactStore(settings.artifact_dir), state.conversation.transcript)]
    assert len(transcript) == state.conversation.messages.base + len(state.conversation.messages.items) == 2 + 2 * (STEPS + 1) - 1 + 20
    assert state.conversation.messages.base > STEPS and transcript[-1]["content"] == f"{STEPS} steps done"
    delivered = Counter(m["content"] for m in transcript if m["role"] == "user" and m["content"].startswith("note "))
    assert delivered == Counter({f"note {i}": 1 for i in range(20)})
    # the last handover carried only recent messages and tool calls (and every effect: rollback needs them)
    carried = json.loads(events[0].workflow_execution_started_event_attributes.input.payloads[0].data)["continuation"]
    requests = [json.loads(e.activity_task_scheduled_event_attributes.input.payloads[0].data) for e in events
                if e.activity_task_scheduled_event_attributes.activity_type.name == "model.call"]
    assert all(r["call_ref"] == requests[0]["call_ref"] for r in requests), "one config for the whole chain"
    held = carried["conversation"]["messages"].get("items", [])  # payloads leave defaults out
    assert len(held) <= 3 and len(carried["calls"]["tool_calls"]["items"]) == KEEP_TOOL_CALLS
    assert len(carried["effects"]["stack"]["items"]) == carried["used"]["tool_calls"]
    lines = (settings.workspace_root / "long" / "probe.log").read_text().splitlines()
    assert sum(line.startswith("done ") for line in lines) == STEPS


async def test_the_event_bound_continues_as_new_before_the_suggestion(early_server, settings):
    pages = []

    async def read_first_page(handle):  # `ratchet transcript`: earlier pages come from the artifact store
        env = settings.model_copy(update={"temporal_address": early_server.address})
        pages.append(await ratchet(env, "transcript", handle.workflow_id, "--offset", "0", "--limit", "3",
                                   extra_env={"RATCHET_ARTIFACT_DIR": str(settings.artifact_dir)}))

    result, state, events = await run_long(early_server, settings, "approver", 120, after=read_first_page)
    assert result.phase == Phase.DONE
    assert state.continued >= 2
    assert len(events) < 400 + 50
    code, out = pages[0]
    lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert code == 0 and state.conversation.messages.base > 3, out
    assert [m["index"] for m in lines] == [0, 1, 2] and lines[1]["content"].startswith("do the task"), out


def test_a_handover_keeps_what_a_rollback_to_the_last_checkpoint_needs():
    from ratchet.contracts import AgentRun, Checkpoint, Message, ToolCallRecord, ToolResult
    from ratchet.workflows.handover import trimmed

    messages = [Message(role="user", content=str(i)) for i in range(30)]
    older = Checkpoint(id="cp-1", step=2, created_at="t", effects_len=0, messages_len=8, unsent=6, summary="s")
    checkpoint = Checkpoint(id="cp-2", step=3, created_at="t", effects_len=0, messages_len=12, unsent=10, summary="s")
    calls = [ToolCallRecord(step=i, call_id="c", tool="t", key=f"w/{i}/c", arguments="{}", result=ToolResult(ok=True, output="x"))
             for i in range(KEEP_TOOL_CALLS + 7)]
    state = AgentState(v=STATE_VERSION, workflow_id="w", run=AgentRun(agent="a", objective="o"))
    state.conversation.messages.reset(messages)
    state.conversation.unsent = 28
    state.effects.checkpoints.reset([older, checkpoint])
    state.calls.tool_calls.reset(calls)
    out = trimmed(state)
    held = out.conversation.messages
    assert held.base == 10 and [m.content for m in held.items] == [str(i) for i in range(10, 30)]
    records = out.calls.tool_calls
    assert records.base == 7 and records.items[0].step == 7 and len(records.items) == KEEP_TOOL_CALLS
    # what the workflow does on a rollback to cp-2: the messages up to it, from the base on, remain
    # (to cp-1, older than the base, they are read back from the transcript: tests/workflows/test_effects_archive.py)
    held.cut_at(checkpoint.messages_len)
    assert [m.content for m in held.items] == ["10", "11"]
    # with no checkpoint, everything the model has seen goes: the handover is as small as the step
    out.effects.checkpoints.reset([])
    out.conversation.unsent = 12
    again = trimmed(out)
    assert again.conversation.messages.items == [] and again.conversation.messages.base == 12
