"""`make demo` end to end: `python -m devtools.demo` starts its own dev server and worker, runs the
coder agent on examples/calculator with the scripted model, and exits 0 with the run DONE."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

import pytest

from devtools.demo import demo_script
from tests.ops_workers import ROOT
from tests.runs import until

pytestmark = pytest.mark.e2e  # slow: `make test-e2e`, not `make test`

def test_make_demo_runs_the_coder_agent_to_done(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_", "RATCHET_", "TEMPORAL_"))}
    env["RATCHET_DEMO_DIR"] = str(tmp_path / "demo")
    done = subprocess.run(
        [sys.executable, "-m", "devtools.demo"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=180,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "phase: DONE" in done.stdout and "checkpoint cp-1" in done.stdout, done.stdout
    assert "guardrail no-secrets-in: secret in the objective, redacted before the model saw it" in done.stdout
    assert "stopped the worker and the dev server" in done.stdout
    assert done.stdout.rstrip().endswith("make up"), done.stdout  # where to go next
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


def test_make_demo_console_leaves_one_approval_in_the_inbox_until_ctrl_c(tmp_path):
    """`make demo CONSOLE=1`: after the demo, the console's URL; its inbox holds the ops run waiting
    for approval; Ctrl-C (SIGINT) stops the console, the worker and the dev server."""
    import re
    import signal

    import httpx2 as httpx

    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_", "RATCHET_", "TEMPORAL_"))}
    env["RATCHET_DEMO_DIR"] = str(tmp_path / "demo")
    proc = subprocess.Popen(
        [sys.executable, "-u", "-m", "devtools.demo", "--console"], cwd=ROOT, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        seen = []
        for line in proc.stdout:
            seen.append(line)
            if found := re.search(r"console: (http://127\.0\.0\.1:\d+)/inbox", line):
                break
        else:
            raise AssertionError("no console URL:\n" + "".join(seen))
        url = found[1]

        def inbox_page():  # the URL is printed once the console answers: no connection refused
            page = httpx.get(f"{url}/inbox", timeout=30)
            return page if page.status_code == 200 and "create_ticket" in page.text else None

        inbox = asyncio.run(until(inbox_page, "the demo's approval in the console's inbox", timeout=60))
        assert re.search(r"<title>\(1\)", inbox.text) or "(1)" in inbox.text  # the count in the title
        web_ui = re.search(r"Temporal Web UI: (http://127\.0\.0\.1:\d+)", "".join(seen))[1]
        runs = httpx.get(url + "/", timeout=30).text
        assert f'href="{web_ui}/namespaces/default/workflows/ops-demo-' in runs, runs  # the demo's own Web UI
        proc.send_signal(signal.SIGINT)
        rest = proc.communicate(timeout=60)[0]
        assert "stopped the worker and the dev server" in rest, "".join(seen) + rest
    finally:
        if proc.poll() is None:
            proc.kill()
