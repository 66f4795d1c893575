"""`make demo` end to end: `python -m devtools.demo` starts its own dev server and worker, runs the
coder agent on examples/calculator with the scripted model, and exits 0 with the run DONE."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.ops_workers import ROOT


def test_make_demo_runs_the_coder_agent_to_done(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "RATCHET_", "TEMPORAL_"))}
    env["RATCHET_DEMO_DIR"] = str(tmp_path / "demo")
    done = subprocess.run(
        [sys.executable, "-m", "devtools.demo"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=180,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "phase: DONE" in done.stdout and "checkpoint cp-1" in done.stdout, done.stdout
    assert "stopped the worker and the dev server" in done.stdout
    fixed = next((tmp_path / "demo" / "workspaces").iterdir()) / "calc.py"
    assert "return a + b" in fixed.read_text()
