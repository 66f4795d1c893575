"""model.call driven as an activity (temporalio's ActivityEnvironment), with a real SQLite ledger
and artifact directory: the paths a workflow run rarely reaches."""

from __future__ import annotations

import dataclasses

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from ratchet.activities.model import ModelActivities
from ratchet.activities.prepare import RunPreparer
from ratchet.contracts import AgentRun, Message, ModelReply, ModelRequest, PrepareRun, Usage
from ratchet.core.profiles import AgentProfile, ProfileRegistry, default_profiles
from ratchet.models.builtin import builtin_providers
from ratchet.ops.settings import Settings
from ratchet.plugin import builtin_tools
from ratchet.stores.artifacts import DirectoryArtifactStore
from ratchet.stores.ledger import SqliteLedger


async def test_a_retried_model_call_returns_the_reply_the_ledger_holds_instead_of_calling_again(tmp_path):
    """A reply that arrived but whose completion was lost (worker crash) is paid for once."""
    settings = Settings(artifact_dir=tmp_path / "artifacts", ledger_path=tmp_path / "ledger.sqlite3")
    store, ledger = DirectoryArtifactStore(settings.artifact_dir), SqliteLedger(settings.ledger_path)
    providers = builtin_providers(store)
    preparer = RunPreparer(settings, default_profiles, builtin_tools(), providers, store, ledger)
    model = {"provider": "scripted", "options": {"script": [{"content": "x"}]}, "stream": False}  # no run to stream to
    run = AgentRun.model_validate({"agent": "probe", "objective": "o", "model": model})
    plan = await ActivityEnvironment().run(preparer.plan, PrepareRun(run=run, workflow_id="wf", chain="c1"))
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, workflow_id="wf")
    recorded = ModelReply(message=Message(role="assistant", content="recorded"), usage=Usage(), transcript="t" * 64)
    ledger.begin("wf/1/model")
    ledger.complete("wf/1/model", recorded.model_dump(mode="json"))
    request = ModelRequest(step=1, call_ref=plan.call_ref, new_messages=[Message(role="user", content="o")])
    assert await env.run(ModelActivities(providers, store, ledger).call, request) == recorded
    fresh = await env.run(ModelActivities(providers, store, ledger).call, request.model_copy(update={"step": 2}))
    assert fresh.message.content == "x" and ledger.begin("wf/2/model").result["message"]["content"] == "x"


async def test_a_profile_with_a_window_too_small_to_hold_a_call_and_its_result_is_refused(tmp_path):
    settings = Settings(artifact_dir=tmp_path / "artifacts", workspace_root=tmp_path / "ws")
    profiles = ProfileRegistry()
    profiles.register(AgentProfile(name="tiny", system_prompt="s", tools=[], context_messages=1))
    store = DirectoryArtifactStore(settings.artifact_dir)
    preparer = RunPreparer(settings, profiles, builtin_tools(), builtin_providers(store), store)
    run = AgentRun.model_validate({"agent": "tiny", "objective": "o", "model": {"provider": "scripted", "options": {"script": [{"content": "x"}]}}})
    with pytest.raises(ApplicationError, match="profile 'tiny': context_messages must be at least 2, not 1") as err:
        await ActivityEnvironment().run(preparer.plan, PrepareRun(run=run, workflow_id="wf"))
    assert err.value.non_retryable and err.value.type == "InvalidProfile"
