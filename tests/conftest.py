"""Shared fixtures: one dev server per session, a fresh task queue and worker per test.

RATCHET_TEST_CACHE=1 keeps the workflow cache on; by default workers run with
max_cached_workflows=0, so every workflow task replays the history so far and any
non-determinism surfaces in ordinary tests.
"""

from __future__ import annotations

import os
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from temporalio.client import Client

import tests.plugins.policy  # noqa: F401  (registers the policy profile)
import tests.plugins.probe  # noqa: F401  (registers the probe tools and profile)
from devtools.devserver import DevServer
from ratchet.ops.process import exit_now
from ratchet.ops.settings import Settings
from ratchet.payloads.converter import BASE_CONVERTER
from ratchet.testing.openai_server import OpenAIServer
from ratchet.worker.main import build_worker

pytest_plugins = ("tests.servers", "tests.s3_server", "tests.azurite_server")
"""The stores' session fixtures, `postgres_server`, `s3_server` (SeaweedFS) and `azurite_server`,
each started only for a test that asks for it. Registered here, before a test module or
devtools/chaos/hosts.py imports them, so that pytest rewrites their asserts."""

REPLAY_EVERY_TASK = os.environ.get("RATCHET_TEST_CACHE") != "1"
os.environ.setdefault("RATCHET_BUILD_ID", "test")
"""Every worker of a test session is build `test` of its task queue's deployment (each test's queue
is a deployment of its own, made current by its first worker): the session's code does not change
under it. Tests of deploys name their deployment and builds (tests/deploys/test_deploys.py)."""


@pytest.fixture(scope="session")
def dev_server(tmp_path_factory: pytest.TempPathFactory):
    state = tmp_path_factory.mktemp("temporal")
    server = DevServer(db_file=state / "temporal.db", log_file=state / "server.log")
    with server:
        yield server


@pytest.fixture(scope="session")
async def client(dev_server: DevServer) -> Client:
    return await Client.connect(dev_server.address, data_converter=BASE_CONVERTER)


@pytest.fixture(scope="session")
def openai_server():
    with OpenAIServer() as server:
        yield server


@pytest.fixture(scope="session")
def anthropic_server():
    from ratchet.testing.anthropic_server import AnthropicServer

    with AnthropicServer() as server:
        yield server


@pytest.fixture
def anthropic_key(monkeypatch: pytest.MonkeyPatch, anthropic_server) -> str:
    """As `openai_key`, for the anthropic provider and the local Anthropic server (set before the
    worker is built: a provider reads its settings when it is made)."""
    key = f"sk-ant-{uuid.uuid4().hex[:12]}"
    monkeypatch.setenv("ANTHROPIC_BASE_URL", anthropic_server.base_url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", key)
    return key


@pytest.fixture
def openai_key(monkeypatch: pytest.MonkeyPatch, openai_server: OpenAIServer) -> str:
    """The openai provider's settings, as a worker reads them (from its environment): the test
    server, and a key of this test's own (the server picks a test's script by its key)."""
    key = f"key-{uuid.uuid4().hex[:12]}"
    monkeypatch.setenv("OPENAI_BASE_URL", openai_server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", key)
    return key


@pytest.fixture
def settings(tmp_path: Path, dev_server: DevServer, openai_key: str, monkeypatch: pytest.MonkeyPatch) -> Settings:
    # the example tracker's own setting (activities/tracker_tools.py), read from the environment
    monkeypatch.setenv("RATCHET_TRACKER_PATH", str(tmp_path / "tracker.sqlite3"))
    return Settings(
        temporal_address=dev_server.address,
        task_queue=f"test-{uuid.uuid4().hex[:12]}",
        workspace_root=tmp_path / "workspaces",
        artifact_dir=tmp_path / "artifacts",
        ledger_path=tmp_path / "ledger.sqlite3",
        max_cached_workflows=0 if REPLAY_EVERY_TASK else 100,
    )


@pytest.fixture
async def worker(client: Client, settings: Settings):
    async with build_worker(client, settings, graceful_shutdown_timeout=timedelta(0)) as running:
        yield running


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    session.config._ratchet_exit_status = int(exitstatus)  # type: ignore[attr-defined]


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """End the process with pytest's own status: temporalio can abort at interpreter exit
    (SDK issue #300) after every test has passed; that must never turn CI red."""
    status = getattr(config, "_ratchet_exit_status", None)
    if status is not None:
        exit_now(status)
