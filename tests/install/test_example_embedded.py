"""examples/embedded: an application's worker with its own workflow beside Ratchet's, and its
code driving a run through `ratchet.client` (start, approve, result), as real processes."""

from __future__ import annotations

import sys

import pytest

from devtools.workers import WorkerProcess
from tests.ops_workers import ROOT, run_command, worker_env

pytestmark = pytest.mark.e2e  # slow: `make test-e2e`, not `make test`

async def test_an_application_embeds_ratchet_and_drives_a_run_with_the_client(settings):
    env = worker_env(settings)
    worker = await WorkerProcess([sys.executable, "-m", "examples.embedded.worker"], env=env, cwd=ROOT,
                                 ready="embedded worker ready", name="embedded worker").start(timeout=60)
    try:
        code, out = await run_command(sys.executable, "-m", "examples.embedded.app", env=env, timeout=60)
    finally:
        await worker.stop()
    assert code == 0, out
    assert "waiting for approval: create_ticket {'title': 'prod: deploy v2'}" in out
    assert "DONE: opened the prod deploy ticket" in out and "release notes for v2: ready" in out
