"""`make demo`: a dev server, a worker and a real agent run, started as a user would.

The coder agent fixes a bug in examples/calculator. With OPENAI_API_KEY or OPENAI_BASE_URL set,
a real model drives it; otherwise the scripted provider replays a fixed sequence of tool calls.
Every process started here is stopped before exit. With `--console` (`make demo CONSOLE=1`) the
demo then starts an ops run that waits for an approval and `ratchet console`, prints its URL and
keeps everything up until Ctrl-C.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from devtools.up import DEV_PROMOTE
from devtools.devserver import DevServer, free_port, port_open, temporal_binary
from devtools.workers import stop_worker
from ratchet.client import NotStartedYet, RatchetClient
from ratchet.contracts import AGENT_WORKFLOW, AgentState, GuardrailTrip
from ratchet.models.builtin import provider_settings
from ratchet.ops.settings import load_settings

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "examples" / "calculator"
FIXED_CALC = (SAMPLE / "calc.py").read_text().replace("return a - b", "return a + b")
BROKEN_CALC = FIXED_CALC.replace("return a * b", "return a ** b")
TESTS = ["python", "-m", "unittest", "-q"]
CONSOLE_START_S = 30.0
"""How long `ratchet console` may take to answer on its port before the demo gives up."""


def demo_script() -> list[dict]:
    return [
        {"tool_calls": [{"name": "list_files", "arguments": {}}, {"name": "run_command", "arguments": {"argv": TESTS}}]},
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "calc.py"}}]},
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "calc.py", "content": FIXED_CALC}}]},
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "calc.py", "content": BROKEN_CALC}}]},
        {"content": "Fixed add() in calc.py (it subtracted); all tests pass at checkpoint cp-1. "
                    "A follow-up change to multiply() broke the tests and was rolled back to cp-1."},
    ]


PASTED_TOKEN = "ghp_" + "DEMOdemo" * 4 + "0000"
"""A (fake) GitHub token pasted into the request: the coder's `no-secrets-in` guardrail redacts it
before the model sees it, which the demo shows."""


def demo_input(workspace: str, real_model: bool) -> dict:
    run: dict = {
        "agent": "coder",
        "objective": "The tests in this repository fail. Find the bug, fix it, and make the tests pass. "
        f"(CI token, if you need it: {PASTED_TOKEN})",
        "workspace": workspace,
    }
    if not real_model:
        run["model"] = {"provider": "scripted", "options": {"script": demo_script()}}
    return run


def endpoint_configured() -> bool:
    """Whether the worker's default provider (RATCHET_PROVIDER) has a key or endpoint: then the demo
    uses it instead of the scripted provider."""
    found = provider_settings().get(load_settings().provider)
    return bool(found is not None and found.configured)


def main() -> int:
    # Ctrl-C (SIGINT) stops the demo even where it was started with SIGINT ignored, which a child
    # inherits (a background job of a non-interactive shell, a pytest-xdist worker): Python then
    # installs no KeyboardInterrupt handler of its own, and `make demo CONSOLE=1` never stopped
    signal.signal(signal.SIGINT, signal.default_int_handler)
    state_dir = Path(os.environ.get("RATCHET_DEMO_DIR") or ROOT / ".ratchet" / "demo")
    state_dir.mkdir(parents=True, exist_ok=True)
    real_model = endpoint_configured()
    server = DevServer(db_file=state_dir / "temporal.db", ui_port=free_port(), log_file=state_dir / "server.log")
    worker: subprocess.Popen | None = None
    print("starting the Temporal dev server ...", flush=True)
    server.start()
    try:
        print(f"Temporal Web UI: {server.ui_url}  (open it while the demo runs)", flush=True)
        worker = _start_worker(server, state_dir)
        status = _run_agent(server, state_dir, real_model)
        if "--console" in sys.argv[1:]:
            _console(server, state_dir)
        return status
    finally:
        stop_worker(worker)
        server.stop()
        print("stopped the worker and the dev server", flush=True)
        print("For a dev server and a worker that stay up, which the README's next sections use: make up", flush=True)


def _env(server: DevServer, state_dir: Path) -> dict[str, str]:
    env = dict(os.environ, TEMPORAL_ADDRESS=server.address, RATCHET_WORKSPACE_ROOT=str(state_dir / "workspaces"))
    env.setdefault("RATCHET_ARTIFACT_DIR", str(state_dir / "artifacts"))
    env.setdefault("RATCHET_LEDGER_PATH", str(state_dir / "ledger.sqlite3"))
    env.setdefault("RATCHET_TRACKER_PATH", str(state_dir / "tracker.sqlite3"))
    env.setdefault("RATCHET_PROMOTE", DEV_PROMOTE)  # the demo's server keeps its state: this build is the current one
    return env


def _start_worker(server: DevServer, state_dir: Path) -> subprocess.Popen:
    env = _env(server, state_dir)
    log = open(state_dir / "worker.log", "ab")
    proc = subprocess.Popen([sys.executable, "-m", "ratchet.worker"], env=env, stdout=log, stderr=subprocess.STDOUT)
    print(f"worker started (pid {proc.pid}, log {state_dir / 'worker.log'})", flush=True)
    return proc


def _run_agent(server: DevServer, state_dir: Path, real_model: bool) -> int:
    workflow_id = f"demo-{int(time.time())}"
    workspace = state_dir / "workspaces" / workflow_id
    shutil.copytree(SAMPLE, workspace, ignore=shutil.ignore_patterns("__pycache__"))
    run_input = json.dumps(demo_input(workflow_id, real_model))
    cmd = [
        temporal_binary(), "workflow", "start", "--address", server.address,
        "--type", AGENT_WORKFLOW, "--task-queue", "ratchet", "--workflow-id", workflow_id,
        "--input", run_input,
    ]
    shown = run_input if len(run_input) < 200 else run_input[:160] + " ...}"
    print(f"\n$ temporal workflow start --type AgentWorkflow --task-queue ratchet --workflow-id {workflow_id} "
          f"--input '{shown}'", flush=True)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    print(f"model: {'your endpoint' if real_model else 'scripted provider (set OPENAI_API_KEY, or RATCHET_PROVIDER=anthropic and ANTHROPIC_API_KEY, for a real model)'}\n")
    final = asyncio.run(_follow(server.address, workflow_id))
    print(f"\nphase: {final.phase}   steps: {final.step}   tokens: "
          f"{final.used.prompt_tokens + final.used.completion_tokens}")
    for trip in final.guardrails:
        print(_tripped(trip))
    if final.answer:
        print(f"answer: {final.answer}")
    if final.last_error and final.phase != "DONE":
        print(f"error: {final.last_error}")
    print(f"workspace: {workspace}")
    return 0 if final.phase == "DONE" else 1


def _tripped(trip: GuardrailTrip) -> str:
    done = {"redact": "redacted", "stop": "stopped the run", "ask": "asked a person"}[trip.action]
    when = " before the model saw it" if trip.on == "input" else ""
    return f"guardrail {trip.guardrail}: {', '.join(trip.found)} in the {trip.where}, {done}{when}"


async def _follow(address: str, workflow_id: str) -> AgentState:
    """Print each tool call as it completes, until the run ends."""
    runs = await RatchetClient.connect(load_settings().model_copy(update={"temporal_address": address}))
    run = runs.get(workflow_id)
    shown = [0, 0, 0]
    result_task = asyncio.ensure_future(run.result())
    while True:
        try:
            _show(await run.state(), shown)
        except NotStartedYet:
            pass
        if result_task.done():
            result_task.exception()  # a failed run is reported from its state
            return await run.state()
        await asyncio.sleep(0.3)


def _show(state: AgentState, shown: list[int]) -> None:
    """Print tool calls, checkpoints and rollbacks not shown yet, in step order."""
    lines: list[tuple[int, int, str]] = []
    for record in state.calls.tool_calls.items[shown[0]:]:
        status = "ok " if record.result.ok else "ERR"
        first = record.result.output.splitlines()[0] if record.result.output else ""
        lines.append((record.step, 0, f"  step {record.step:>2}  {status} {record.tool:<12} "
                                      f"{_args(record.arguments):<40} -> {first[:60]}"))
    for cp in state.effects.checkpoints.items[shown[1]:]:
        patch = cp.patch_ref.digest[:12] if cp.patch_ref else "-"
        lines.append((cp.step, 1, f"  checkpoint {cp.id}: {cp.summary}; patch {patch}"))
    for report in state.effects.rollbacks[shown[2]:]:
        lines.append((state.step, 2, f"  rollback to {report.checkpoint_id or 'start'} ({report.reason}): "
                                     f"undone {len(report.undone)}, left irreversible {len(report.irreversible)}, "
                                     f"failed {len(report.not_undone)}"))
    for _, _, line in sorted(lines, key=lambda item: item[:2]):
        print(line, flush=True)
    shown[:] = [len(state.calls.tool_calls.items), len(state.effects.checkpoints.items), len(state.effects.rollbacks)]


def _console(server: DevServer, state_dir: Path) -> None:
    """An ops run waiting for approval, and `ratchet console` on it until Ctrl-C."""
    workflow_id = f"ops-demo-{int(time.time())}"
    script = [{"tool_calls": [{"name": "create_ticket", "arguments": {"title": "prod deploy of v2"}}]},
              {"content": "Opened the ticket for the prod deploy of v2."}]
    run = {"agent": "ops", "objective": "open a ticket for the prod deploy of v2",
           "model": {"provider": "scripted", "options": {"script": script}}}
    asyncio.run(_start_waiting(server.address, run, workflow_id))
    port = free_port()
    env = _env(server, state_dir)
    env["RATCHET_TEMPORAL_UI_URL"] = f"{server.ui_url}/namespaces/default"  # its links to this server's UI
    log = open(state_dir / "console.log", "ab")
    console = subprocess.Popen([sys.executable, "-m", "ratchet.cli.main", "console", "--port", str(port)],
                               env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + CONSOLE_START_S
        while not port_open(port):  # the URL is printed once it answers
            if console.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"ratchet console did not start: see {state_dir / 'console.log'}")
            time.sleep(0.1)
        print(f"\n{workflow_id} waits for an approval (create_ticket 'prod deploy of v2').")
        print(f"console: http://127.0.0.1:{port}/inbox   (Ctrl-C stops the console, the worker and the dev server)",
              flush=True)
        console.wait()
    except KeyboardInterrupt:
        pass
    finally:
        stop_worker(console)


async def _start_waiting(address: str, run: dict, workflow_id: str) -> None:
    settings = load_settings().model_copy(update={"temporal_address": address})
    client = await RatchetClient.connect(settings)
    handle = await client.start(run, workflow_id)
    while True:
        try:
            if (await handle.state()).calls.pending_approvals:
                return
        except NotStartedYet:
            pass
        await asyncio.sleep(0.2)


def _args(raw: str) -> str:
    try:
        value = json.loads(raw)
    except ValueError:
        return raw[:44]
    if isinstance(value, dict):
        value = {k: (" ".join(v) if isinstance(v, list) else v) for k, v in value.items()}
        value = {k: (v if len(str(v)) < 24 else str(v)[:21] + "...") for k, v in value.items()}
    return json.dumps(value)[:40]


if __name__ == "__main__":
    from ratchet.ops.process import exit_now

    exit_now(main())
