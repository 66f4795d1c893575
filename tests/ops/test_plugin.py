"""RatchetPlugin in a worker the user builds, next to their own workflow and activity, with backends
injected through RatchetOptions; and the client connection from Temporal's env config."""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from temporalio import activity, workflow
from temporalio.worker import Worker

from ratchet.client import RatchetClient
from ratchet.contracts import ArtifactRef, Budget, Phase
from ratchet.core.profiles import AgentProfile, ProfileRegistry
from ratchet.core.tools import ToolContext
from ratchet.ops.settings import Settings, SettingsError, load_settings
from ratchet.plugin import RatchetOptions, RatchetPlugin, builtin_profiles, builtin_tools, connect
from ratchet.stores.artifacts import DirectoryArtifactStore
from ratchet.stores.ledger import Entry, SqliteLedger
from tests.ops.test_ops_settings import CLEAN_ENV
from tests.ops_workers import run_command


@activity.defn
async def greet(name: str) -> str:
    return f"hello, {name}"


# Unsandboxed: the sandbox would re-import this test module (a user's workflow module would be sandboxed).
@workflow.defn(sandboxed=False)
class GreetingWorkflow:
    @workflow.run
    async def run(self, name: str) -> str:
        return await workflow.execute_activity(greet, name, start_to_close_timeout=timedelta(seconds=10))


class CountingLedger(SqliteLedger):
    """The SQLite ledger, counting the calls made on it."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.calls: Counter[str] = Counter()

    def begin(self, key: str) -> Entry | None:
        self.calls["begin"] += 1
        return super().begin(key)

    def complete(self, key: str, result: dict[str, Any]) -> None:
        self.calls["complete"] += 1
        super().complete(key, result)

    def claim(self, workflow_id: str, chain: str) -> str | None:
        self.calls["claim"] += 1
        return super().claim(workflow_id, chain)


class CountingArtifacts(DirectoryArtifactStore):
    """The directory artifact store, counting puts and gets."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.calls: Counter[str] = Counter()

    def put(self, data: bytes, media_type: str = "application/octet-stream") -> ArtifactRef:
        self.calls["put"] += 1
        return super().put(data, media_type)

    def get(self, ref: ArtifactRef) -> bytes:
        self.calls["get"] += 1
        return super().get(ref)


HELLO = {  # README's hello example
    "agent": "coder", "objective": "Create hello.txt", "workspace": "hello",
    "model": {"provider": "scripted", "options": {"script": [
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "hello.txt", "content": "hi\n"}}]},
        {"content": "Wrote hello.txt"}]}},
    "budget": {"max_steps": 5},
}


async def test_ratchet_runs_in_the_users_own_worker_on_the_backends_given_in_options(client, settings, tmp_path):
    ledger, artifacts = CountingLedger(tmp_path / "own-ledger.sqlite3"), CountingArtifacts(tmp_path / "own-artifacts")
    options = RatchetOptions.from_settings(settings, ledger=ledger, artifacts=artifacts)
    assert options.tools is builtin_tools() and "write_file" in options.tools.tools
    async with Worker(
        client, task_queue=settings.task_queue, workflows=[GreetingWorkflow], activities=[greet],
        plugins=[RatchetPlugin(options)], max_cached_workflows=0, graceful_shutdown_timeout=timedelta(0),
    ):
        run = await RatchetClient(client, settings).start(HELLO, f"hello-{uuid.uuid4().hex[:8]}")
        greeting = await asyncio.wait_for(client.execute_workflow(
            GreetingWorkflow.run, "ratchet", id=f"greet-{uuid.uuid4().hex[:8]}", task_queue=settings.task_queue,
        ), 60)
        result = await asyncio.wait_for(run.result(), 60)  # a failing activity would retry forever
    assert greeting == "hello, ratchet"
    assert result.phase == Phase.DONE and result.answer == "Wrote hello.txt", result.last_error
    assert (settings.workspace_root / "hello" / "hello.txt").read_text() == "hi\n"
    assert ledger.calls["claim"] == 1 and ledger.calls["begin"] >= 1 and ledger.calls["complete"] >= 1, ledger.calls
    assert artifacts.calls["put"] >= 1 and artifacts.calls["get"] >= 1, artifacts.calls
    assert not settings.ledger_path.exists() and not settings.artifact_dir.exists(), "the defaults were never built"


def profile_file(path: Path, address: str) -> Path:
    path.write_text(
        "[profile.default]\n"
        'address = "127.0.0.1:1"\n'  # nothing listens there: the test fails if this profile is used
        "[profile.ratchet-test]\n"
        f'address = "{address}"\n'
        'namespace = "default"\n'
        "[profile.cloud]\n"
        'address = "ns.acct.tmprl.cloud:7233"\n'
        'namespace = "ns.acct"\n'
        'api_key = "profile-secret-api-key"\n'
    )
    return path


async def test_a_temporal_config_file_profile_is_the_connection(dev_server, tmp_path, monkeypatch):
    config = profile_file(tmp_path / "temporal.toml", dev_server.address)
    for name in ("TEMPORAL_ADDRESS", "TEMPORAL_NAMESPACE", "TEMPORAL_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TEMPORAL_CONFIG_FILE", str(config))
    monkeypatch.setenv("TEMPORAL_PROFILE", "ratchet-test")
    settings = load_settings()
    assert settings.temporal_connection().address == dev_server.address
    client = await connect(settings)
    assert client.service_client.config.target_host == dev_server.address and client.namespace == "default"
    await client.count_workflows()  # a real call to the dev server

    # settings given in code (or a RATCHET_ENV_FILE) override the profile, as TEMPORAL_* variables would
    given = Settings(temporal_namespace="other", temporal_config_file=config, temporal_profile="cloud")
    assert (given.temporal_connection().address, given.temporal_connection().namespace) == ("ns.acct.tmprl.cloud:7233", "other")


async def test_config_shows_the_profiles_connection_masked_and_names_a_bad_profile(tmp_path):
    config = str(profile_file(tmp_path / "temporal.toml", "localhost:7233"))
    env = {**CLEAN_ENV, "TEMPORAL_CONFIG_FILE": config, "TEMPORAL_PROFILE": "cloud"}
    code, out = await run_command(sys.executable, "-m", "ratchet.cli.main", "config", env=env)
    assert code == 0, out
    shown = json.loads(out)
    assert shown["temporal_address"] == "ns.acct.tmprl.cloud:7233" and shown["temporal_namespace"] == "ns.acct"
    assert shown["temporal_api_key"] == "****" and shown["temporal_tls"] is True
    assert (shown["temporal_config_file"], shown["temporal_profile"]) == (config, "cloud")
    assert "profile-secret-api-key" not in out

    code, out = await run_command(sys.executable, "-m", "ratchet.cli.main", "config", env={**env, "TEMPORAL_PROFILE": "nope"})
    assert code == 2 and "TEMPORAL_PROFILE: " in out and "nope" in out, out


async def test_a_worker_refuses_to_start_with_a_profile_budget_no_run_could_have(client, settings):
    """`delegate` hands a sub-agent what is left of the budget: over the run limits, every one failed."""
    profiles = ProfileRegistry()
    profiles.register(AgentProfile(name="huge", system_prompt="x", tools=[], budget=Budget(max_tokens=10**12)))
    options = RatchetOptions.from_settings(settings, profiles=profiles)
    worker = Worker(client, task_queue=settings.task_queue, plugins=[RatchetPlugin(options)])
    with pytest.raises(SettingsError) as refused:
        await asyncio.wait_for(worker.run(), 30)
    assert "profile 'huge': budget.max_tokens: Input should be less than or equal to 10000000000" in str(refused.value)
    assert builtin_profiles().problems() == []  # the built-in and test profiles fit


class Card(BaseModel):
    number: str


async def test_a_worker_refuses_a_compensable_tool_without_an_undo(client, settings):
    """A compensable tool promises it can be undone; without an @undo_for the worker does not start."""
    from ratchet.core.tools import ToolRegistry

    tools = ToolRegistry()

    @tools.tool(effect="compensable")
    async def charge_card(ctx: ToolContext, args: Card) -> str:
        """Charge a card."""
        return "charged"

    worker = Worker(client, task_queue=f"refuse-{uuid.uuid4().hex[:8]}",
                    plugins=[RatchetPlugin(RatchetOptions.from_settings(settings, tools=tools))])
    with pytest.raises(SettingsError, match=r"tool 'charge_card' is declared effect=\"compensable\" but has no @undo_for"):
        await worker.run()


async def test_a_users_sandboxed_workflow_may_live_in_a_module_that_imports_ratchet(client, settings):
    """The plugin passes `ratchet` through the SDK's sandbox: a user's workflow module that imports
    the plugin (RestrictedWorkflowAccessError on urllib otherwise) runs on a worker with Ratchet."""
    from tests.plugins.user_worker import UserGreeting

    queue = f"user-{uuid.uuid4().hex[:8]}"
    async with Worker(client, task_queue=queue, workflows=[UserGreeting],
                      plugins=[RatchetPlugin(RatchetOptions.from_settings(settings))]):
        result = await client.execute_workflow(UserGreeting.run, "ada", id=f"user-{uuid.uuid4().hex[:8]}",
                                               task_queue=queue, execution_timeout=timedelta(seconds=20))
    assert result == "hello, ada"
