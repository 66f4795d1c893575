"""`ratchet health`, the compose worker's healthcheck: exit 0 when Temporal and the stores answer,
1 naming each one that does not."""

from __future__ import annotations

import asyncio
import sys

from tests.ops.test_ops_settings import CLEAN_ENV


async def health(env: dict[str, str]) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "ratchet.cli.main", "health", "--timeout", "3", env={**CLEAN_ENV, **env},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await proc.communicate()
    return proc.returncode, out.decode()


async def test_health_passes_when_temporal_and_the_stores_answer_and_names_what_does_not(dev_server, tmp_path):
    stores = {
        "RATCHET_LEDGER_PATH": str(tmp_path / "ledger.sqlite3"), "RATCHET_ARTIFACT_DIR": str(tmp_path / "artifacts"),
    }
    (tmp_path / "a-file").write_text("not a directory")
    broken = {**stores, "TEMPORAL_ADDRESS": "127.0.0.1:1", "RATCHET_ARTIFACT_DIR": str(tmp_path / "a-file" / "artifacts")}
    (good_code, good), (bad_code, bad) = await asyncio.gather(
        health({**stores, "TEMPORAL_ADDRESS": dev_server.address}), health(broken),
    )
    assert good_code == 0, good
    checks = sorted(line.split(":")[0] for line in good.splitlines())
    assert checks == ["ok   artifacts", "ok   ledger", "ok   temporal"], good
    assert f"{dev_server.address}, namespace 'default'" in good
    assert bad_code == 1, bad
    failed = sorted(line.split(":")[0] for line in bad.splitlines() if line.startswith("FAIL"))
    assert failed == ["FAIL artifacts", "FAIL temporal"], bad
    assert "ok   ledger" in bad
