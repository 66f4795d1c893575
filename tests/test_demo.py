"""`make demo` end to end: `python -m devtools.demo` starts its own dev server and worker, runs the
coder agent on examples/calculator with the scripted model, and exits 0 with the run DONE."""

from __future__ import annotations

import pytest

import os
import subprocess
import sys

from devtools.demo import demo_script
from tests.ops_workers import ROOT


pytestmark = pytest.mark.e2e  # slow: `make test-e2e`, not `make test`

def test_make_demo_runs_the_coder_agent_to_done(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_", "RATCHET_", "TEMPORAL_"))}
    env["RATCHET_DEMO_DIR"] = str(tmp_path / "demo")
    done = subprocess.run(
        [sys.executable, "-m", "devtools.demo"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=180,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "phase: DONE" in done.stdout and "checkpoint cp-1" in done.stdout, done.stdout
    assert "stopped the worker and the dev server" in done.stdout
    fixed = next((tmp_path / "demo" / "workspaces").iterdir()) / "calc.py"
    assert "return a + b" in fixed.read_text()


def test_make_demo_runs_on_anthropic_when_it_is_the_workers_provider(tmp_path, anthropic_server):
    """The same demo with RATCHET_PROVIDER=anthropic: the real path (no script in the run), the coder
    agent's conversation served by the local strict Anthropic server."""
    key = "sk-ant-demo-" + os.urandom(6).hex()
    anthropic_server.set_script(demo_script(), key=key)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_", "RATCHET_", "TEMPORAL_"))}
    env.update(RATCHET_DEMO_DIR=str(tmp_path / "demo"), RATCHET_PROVIDER="anthropic",
               ANTHROPIC_BASE_URL=anthropic_server.base_url, ANTHROPIC_API_KEY=key)
    done = subprocess.run(
        [sys.executable, "-m", "devtools.demo"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=180,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "model: your endpoint" in done.stdout and "phase: DONE" in done.stdout, done.stdout
    requests = anthropic_server.requests_of(key)
    assert len(requests) == 5 and all(r.status == 200 for r in requests), [r.error for r in requests]
