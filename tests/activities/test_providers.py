"""The provider seam on the real dev server: a profile names its provider and model, a run overrides
them, a provider's settings come from its own variables, bad model input fails the run at once
naming the field or variable."""

from __future__ import annotations

import os
from datetime import timedelta

import pytest
from temporalio.testing import ActivityEnvironment

from ratchet.activities.prepare import RunPreparer
from ratchet.client import InvalidInput, RunFailed
from ratchet.contracts import AgentRun, Phase, PrepareRun
from ratchet.core.profiles import AgentProfile, default_profiles, register_profile
from ratchet.models.builtin import builtin_providers
from ratchet.models.openai import OpenAIProvider, OpenAISettings
from ratchet.models.provider import ProviderRegistry
from ratchet.ops.secrets import secret_values
from ratchet.ops.settings import Settings
from ratchet.plugin import builtin_tools
from ratchet.stores.artifacts import DirectoryArtifactStore
from ratchet.worker.main import build_worker
from tests.runs import start

register_profile(AgentProfile(name="pinned-model", system_prompt="s", tools=[], provider="openai", model="ratchet-test"))


async def failure_of(client, settings, run: dict) -> str:
    """Why the run was refused: by the client at its start (the contract's own checks), else by the
    worker when the run was planned."""
    try:
        handle = await start(client, settings, run)
    except InvalidInput as refused:
        return str(refused)
    with pytest.raises(RunFailed) as failure:
        await handle.result()
    return failure.value.reason


async def test_a_profile_names_its_provider_and_model_and_a_run_overrides_the_model(
    client, settings, worker, openai_server, openai_key
):
    openai_server.set_script([{"content": "pinned"}, {"content": "overridden"}], key=openai_key)
    pinned = await (await start(client, settings, {"agent": "pinned-model", "objective": "o"})).result()
    run = {"agent": "pinned-model", "objective": "o", "model": {"provider": "openai", "model": "gpt-4o-mini"}}
    overridden = await (await start(client, settings, run)).result()
    assert pinned.phase == overridden.phase == Phase.DONE
    assert [r.json["model"] for r in openai_server.chat_requests(key=openai_key)] == ["ratchet-test", "gpt-4o-mini"]


async def test_a_run_that_names_another_provider_gets_that_providers_default_model(settings):
    """The profile's model is for the profile's provider: a scripted run of it does not get `ratchet-test`."""
    store = DirectoryArtifactStore(settings.artifact_dir)
    preparer = RunPreparer(settings, default_profiles, builtin_tools(), builtin_providers(store), store)
    model = {"provider": "scripted", "options": {"script": [{"content": "ok"}]}}
    run = AgentRun.model_validate({"agent": "pinned-model", "objective": "o", "model": model})
    plan = await ActivityEnvironment().run(preparer.plan, PrepareRun(run=run, workflow_id="wf"))
    assert (plan.model.provider, plan.model.model) == ("scripted", "scripted")
    assert set(plan.model.options) == {"script_ref"}
    pinned = AgentRun.model_validate({"agent": "pinned-model", "objective": "o"})
    plan = await ActivityEnvironment().run(preparer.plan, PrepareRun(run=pinned, workflow_id="wf"))
    assert (plan.model.provider, plan.model.model, plan.model.options) == ("openai", "ratchet-test", {})


async def test_bad_model_input_fails_the_run_at_once_naming_the_field(client, settings, worker):
    base = {"agent": "probe", "objective": "o"}
    cases = [
        ({"provider": "anthropik"}, "model: unknown provider 'anthropik' (model.provider); this worker has: "),
        ({"options": {"script": []}}, "model: Value error, 'options' are a provider's own: name the 'provider'"),
        ({"provider": "openai", "options": {"seed": 1}}, "model.options.seed: the openai provider takes no options"),
        ({"provider": "scripted"}, "model.options: Value error, give 'script' (a list of replies) or 'script_file'"),
        ({"provider": "scripted", "options": {"script": [{"nope": 1}]}}, "model.options.script.0.nope: Extra inputs"),
        ({"provider": "scripted", "options": {"script_file": "nope.json"}}, "model.options.script_file: 'nope.json' is not in"),
    ]
    for model, says in cases:
        assert says in await failure_of(client, settings, {**base, "model": model}), model


async def test_a_worker_without_the_providers_variable_fails_its_runs_naming_it(
    client, settings, monkeypatch
):
    monkeypatch.delenv("OPENAI_API_KEY")
    monkeypatch.delenv("OPENAI_BASE_URL")
    async with build_worker(client, settings, graceful_shutdown_timeout=timedelta(0)):
        cause = await failure_of(client, settings, {"agent": "probe", "objective": "o"})
    assert "set OPENAI_API_KEY (or OPENAI_BASE_URL" in cause, cause


async def test_the_providers_own_headers_and_organisation_reach_the_endpoint(
    client, settings, monkeypatch, openai_server, openai_key
):
    token = "hdr-" + os.urandom(8).hex()
    monkeypatch.setenv("OPENAI_CUSTOM_HEADERS", f"X-Gateway: {token}\nX-Team: ratchet")
    monkeypatch.setenv("OPENAI_ORG_ID", "org-ratchet")
    openai_server.set_script([{"content": "ok"}], key=openai_key)
    async with build_worker(client, settings, graceful_shutdown_timeout=timedelta(0)):
        result = await (await start(client, settings, {"agent": "probe", "objective": "o"})).result()
    assert result.phase == Phase.DONE
    [request] = openai_server.chat_requests(key=openai_key)
    assert request.headers["x-gateway"] == token and request.headers["x-team"] == "ratchet"
    assert request.headers["openai-organization"] == "org-ratchet"


def test_provider_settings_are_secrets_where_given_in_code_and_in_the_env_file(tmp_path, settings, monkeypatch):
    in_code = "sk-given-in-code-" + os.urandom(8).hex()
    registry = ProviderRegistry()
    registry.register(OpenAIProvider(OpenAISettings(api_key=in_code, headers="Authorization: Bearer gw-secret-token")))
    assert {in_code, "Bearer gw-secret-token"} <= set(secret_values(settings, {}, more=registry.secrets()))
    env_file = tmp_path / ".env"
    in_file = "sk-ant-in-the-env-file-" + os.urandom(8).hex()
    env_file.write_text(f"ANTHROPIC_API_KEY={in_file}\nRATCHET_TASK_QUEUE=q\n")
    monkeypatch.setitem(Settings.model_config, "env_file", env_file)  # as RATCHET_ENV_FILE sets it
    assert in_file in secret_values(settings, {})
    assert OpenAISettings(api_key="sk-x" * 4).masked()["api_key"] == "****"


def test_a_bad_provider_setting_stops_the_worker_naming_the_variable(monkeypatch):
    from ratchet.core.settings_errors import SettingsError
    from ratchet.models.settings import load

    monkeypatch.setenv("OPENAI_CUSTOM_HEADERS", "no colon here")
    with pytest.raises(SettingsError, match="OPENAI_CUSTOM_HEADERS: Value error, must be lines of `Name: value`"):
        load(OpenAISettings)
