"""Settings as an operator meets them: `ratchet config` masks secrets, bad values stop the worker
at start (exit 2) with a message that names the environment variable."""

from __future__ import annotations

import base64
import json
import os
import socket
import sys
import uuid

import pytest

from ratchet.ops.settings import Settings, SettingsError, load_settings
from tests.ops_workers import run_command

CLEAN_ENV = {k: v for k, v in os.environ.items() if not k.startswith(("RATCHET_", "TEMPORAL_", "OPENAI_"))}


def ratchet(*args: str, **env: str):
    return run_command(sys.executable, "-m", "ratchet.cli.main", *args, env={**CLEAN_ENV, **env})


async def test_config_prints_effective_settings_with_every_secret_masked():
    openai_key = f"sk-{uuid.uuid4().hex}"
    temporal_key = f"tmprl-{uuid.uuid4().hex}"
    codec_key = base64.b64encode(os.urandom(32)).decode()
    code, out = await ratchet(
        "config",
        OPENAI_API_KEY=openai_key, TEMPORAL_API_KEY=temporal_key, RATCHET_CODEC_KEYS=f"k1:{codec_key}",
        TEMPORAL_ADDRESS="ns.acct.tmprl.cloud:7233", RATCHET_METRICS_PORT="9464", RATCHET_LOG_FORMAT="JSON",
    )
    assert code == 0, out
    shown = json.loads(out)
    assert shown["providers"]["openai"]["api_key"] == shown["temporal_api_key"] == shown["codec_keys"] == "****"
    for secret in (openai_key, temporal_key, codec_key):
        assert secret not in out
    assert shown["temporal_address"] == "ns.acct.tmprl.cloud:7233"
    assert shown["metrics_port"] == 9464 and shown["log_format"] == "json"
    assert shown["claim_check_bytes"] == 256 * 1024 and shown["shutdown_grace_s"] == 30.0


async def test_bad_settings_stop_the_worker_at_start_naming_each_variable():
    code, out = await ratchet("worker", TEMPORAL_ADDRESS="nohostport", RATCHET_MAX_CONCURRENT_ACTIVITIES="0")
    assert code == 2, out
    assert "TEMPORAL_ADDRESS: Value error, must be HOST:PORT" in out, out
    assert "RATCHET_MAX_CONCURRENT_ACTIVITIES: Input should be greater than or equal to 1" in out, out


@pytest.mark.parametrize(
    ("variable", "value", "says"),
    [
        ("RATCHET_LOG_FORMAT", "xml", "'text' or 'json'"),
        ("RATCHET_CLAIM_CHECK_BYTES", "10000000", "less than or equal to 2097152"),
        ("RATCHET_METRICS_PORT", "70000", "less than or equal to 65535"),
        ("RATCHET_MAX_CONCURRENT_WORKFLOW_TASKS", "1", "greater than or equal to 2"),
        ("RATCHET_SHUTDOWN_GRACE_S", "-1", "greater than or equal to 0"),
    ],
)
def test_each_operations_setting_is_checked(monkeypatch, variable, value, says):
    monkeypatch.setenv(variable, value)
    with pytest.raises(SettingsError, match=f"{variable}: .*{says}"):
        load_settings()


async def test_a_metrics_port_in_use_stops_the_worker_naming_the_variable(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, out = await ratchet(
            "worker", RATCHET_METRICS_HOST="127.0.0.1", RATCHET_METRICS_PORT=str(port),
            RATCHET_ARTIFACT_DIR=str(tmp_path / "a"), RATCHET_LEDGER_PATH=str(tmp_path / "l.sqlite3"),
        )
    assert code == 2, out
    assert f"RATCHET_METRICS_PORT: cannot serve metrics on 127.0.0.1:{port}" in out


def test_worker_settings_have_production_defaults(monkeypatch):
    for name in ("RATCHET_METRICS_PORT", "RATCHET_LOG_FORMAT", "RATCHET_OTEL", "RATCHET_MAX_CONCURRENT_WORKFLOW_TASKS"):
        monkeypatch.delenv(name, raising=False)
    settings = Settings()
    assert settings.max_concurrent_workflow_tasks == 100 and settings.metrics_port is None
    assert settings.log_format == "text" and not settings.otel
    monkeypatch.setenv("RATCHET_LOG_LEVEL", "debug")
    monkeypatch.setenv("RATCHET_LOG_FORMAT", "JSON")
    assert (load_settings().log_level, load_settings().log_format) == ("DEBUG", "json")


async def test_an_unreadable_tls_key_stops_the_worker_naming_the_variable(tmp_path):
    cert, key = tmp_path / "client.pem", tmp_path / "missing.key"
    cert.write_text("-----BEGIN CERTIFICATE-----\n")
    code, out = await ratchet(
        "worker", TEMPORAL_TLS_CLIENT_CERT_PATH=str(cert), TEMPORAL_TLS_CLIENT_KEY_PATH=str(key),
        RATCHET_ARTIFACT_DIR=str(tmp_path / "a"), RATCHET_LEDGER_PATH=str(tmp_path / "l.sqlite3"),
    )
    assert code == 2, out
    assert f"TEMPORAL_TLS_CLIENT_KEY_PATH: cannot read {key}: No such file or directory" in out, out
    assert not (tmp_path / "l.sqlite3").exists(), "stopped before opening the ledger"
