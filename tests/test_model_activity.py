"""model.call driven as an activity (temporalio's ActivityEnvironment), with a real SQLite ledger
and artifact directory: the paths a workflow run rarely reaches."""

from __future__ import annotations

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from ratchet.stores.ledger import SqliteLedger
from ratchet.activities.model import ModelActivities
from ratchet.activities.prepare import RunPreparer
from ratchet.stores import transcripts
from ratchet.stores.artifacts import DirectoryArtifactStore, put_json
from ratchet.contracts import AgentRun, Message, ModelReply, ModelRequest, PrepareRun, Usage
from ratchet.core.profiles import AgentProfile, ProfileRegistry, default_profiles
from ratchet.ops.settings import Settings
from ratchet.core.tools import default_registry


async def test_a_first_call_that_finds_a_recorded_reply_without_a_plan_still_returns_the_plan(tmp_path):
    """An earlier run of the chain, planned by run.prepare, recorded step 1's reply without a plan;
    the workflow of a run planned by its first call needs one."""
    settings = Settings(artifact_dir=tmp_path / "artifacts", ledger_path=tmp_path / "ledger.sqlite3")
    store, ledger = DirectoryArtifactStore(settings.artifact_dir), SqliteLedger(settings.ledger_path)
    preparer = RunPreparer(settings, default_profiles, default_registry, store, ledger)
    model = ModelActivities(settings, store, ledger, preparer)
    said = [Message(role="system", content="s"), Message(role="user", content="o"), Message(role="assistant", content="done")]
    legacy = put_json(store, [m.model_dump(exclude_defaults=True) for m in said])  # before transcript segments
    recorded = ModelReply(message=said[-1], usage=Usage(), transcript=legacy.digest)
    ledger.claim("wf", "c1")  # that earlier run's run.prepare
    ledger.begin("wf/1/model")
    ledger.complete("wf/1/model", recorded.model_dump(mode="json"))
    run = AgentRun.model_validate({"agent": "probe", "objective": "o", "model": {"provider": "scripted", "script": [{"content": "x"}]}})
    request = ModelRequest(step=1, new_messages=[], key="wf/1/model", first=PrepareRun(run=run, workflow_id="wf", chain="c1"))
    reply = await ActivityEnvironment().run(model.call, request)
    assert reply.message.content == "done", "the recorded reply, not a second paid call"
    assert reply.plan is not None and reply.plan.agent == "probe"
    assert request.settings is not None and request.settings.provider == "scripted"  # priced by the metrics
    # the next request leaves call_ref out, so the reply's transcript must name it: written again as a segment
    segment = transcripts.read_segment(store, reply.transcript)
    assert segment.call_ref == reply.plan.call_ref and segment.messages == said and reply.headed
    # recorded by an earlier run of the chain with other settings: its segment names their call_ref
    other = transcripts.write(store, transcripts.Conversation(), "e" * 64, said, prev=None)
    ledger.complete("wf/1/model", recorded.model_copy(update={"transcript": other.digest, "headed": True}).model_dump(mode="json"))
    again = await ActivityEnvironment().run(model.call, request.model_copy(update={"call_ref": None, "settings": None}))
    assert again.headed and transcripts.read_segment(store, again.transcript).call_ref == again.plan.call_ref != "e" * 64


async def test_a_profile_with_a_window_too_small_to_hold_a_call_and_its_result_is_refused(tmp_path):
    settings = Settings(artifact_dir=tmp_path / "artifacts", workspace_root=tmp_path / "ws")
    profiles = ProfileRegistry()
    profiles.register(AgentProfile(name="tiny", system_prompt="s", tools=[], context_messages=1))
    preparer = RunPreparer(settings, profiles, default_registry, DirectoryArtifactStore(settings.artifact_dir))
    run = AgentRun.model_validate({"agent": "tiny", "objective": "o", "model": {"script": [{"content": "x"}]}})
    with pytest.raises(ApplicationError, match="profile 'tiny': context_messages must be at least 2, not 1") as err:
        await ActivityEnvironment().run(preparer.prepare, PrepareRun(run=run, workflow_id="wf"))
    assert err.value.non_retryable and err.value.type == "InvalidProfile"
