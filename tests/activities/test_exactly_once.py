"""The exactly-once protocol (activities/exactly_once.py) as the model call uses it: its thread hops
counted (the ledger may be remote, every hop is a round trip off the event loop). The protocol's
rules run on every ledger backend in the conformance suite (ratchet/testing/exactly_once.py)."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from temporalio.testing import ActivityEnvironment

from ratchet.activities import exactly_once
from ratchet.activities.model import ModelActivities
from ratchet.activities.prepare import RunPreparer
from ratchet.contracts import AgentRun, Message, ModelRequest, PrepareRun
from ratchet.core.profiles import default_profiles
from ratchet.models.builtin import builtin_providers
from ratchet.ops.settings import Settings
from ratchet.plugin import builtin_tools
from ratchet.stores.artifacts import DirectoryArtifactStore
from ratchet.stores.ledger import SqliteLedger
from ratchet.testing.exactly_once import Outcome, Probe


@pytest.fixture
def hops(monkeypatch) -> list[str]:
    """The name of every function `asyncio.to_thread` runs, in order."""
    seen: list[str] = []
    real = asyncio.to_thread

    async def counted(func, /, *args, **kwargs):
        seen.append(getattr(func, "__name__", repr(func)))
        return await real(func, *args, **kwargs)

    monkeypatch.setattr(asyncio, "to_thread", counted)
    return seen


async def test_a_model_call_makes_two_hops_and_a_recorded_one_makes_one(tmp_path, hops):
    settings = Settings(artifact_dir=tmp_path / "artifacts", ledger_path=tmp_path / "ledger.sqlite3")
    store, ledger = DirectoryArtifactStore(settings.artifact_dir), SqliteLedger(settings.ledger_path)
    providers = builtin_providers(store)
    preparer = RunPreparer(settings, default_profiles, builtin_tools(), providers, store, ledger)
    model = {"provider": "scripted", "options": {"script": [{"content": "x"}, {"content": "y"}]}, "stream": False}
    run = AgentRun.model_validate({"agent": "probe", "objective": "o", "model": model})
    plan = await ActivityEnvironment().run(preparer.plan, PrepareRun(run=run, workflow_id="wf", chain="c1"))
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, workflow_id="wf")
    activities = ModelActivities(providers, store, ledger)
    request = ModelRequest(step=1, call_ref=plan.call_ref, new_messages=[Message(role="user", content="o")])
    hops.clear()
    first = await env.run(activities.call, request)
    assert hops == ["_begin", "_complete"], "begin with the reads, then the transcript write with complete"
    hops.clear()
    assert await env.run(activities.call, request) == first and hops == ["_begin"], hops
    hops.clear()
    follow = [Message(role="user", content="more")]
    second = await env.run(activities.call, ModelRequest(step=2, call_ref=plan.call_ref, transcript=first.transcript,
                                                         new_messages=follow))
    assert second.message.content == "y" and hops == ["_begin", "_complete"], hops


async def test_without_a_ledger_the_protocol_only_acts(tmp_path):
    probe = Probe(SqliteLedger(tmp_path / "unused.sqlite3"), "wf/1/a")
    assert await exactly_once.run(None, probe.call("x")) == Outcome(output="x") and probe.acted == ["x"]
    assert await exactly_once.run(None, probe.call("y")) == Outcome(output="y") and probe.acted == ["x", "y"]
    assert probe.ledger.get("wf/1/a") is None
