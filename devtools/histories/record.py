"""`make histories`: record the replay corpus, tests/histories/<scenario>.json.

    python -m devtools.histories.record                 # every scenario
    python -m devtools.histories.record plain-run ...   # some; --out DIR to write elsewhere

Starts a private dev server, a local OpenAI-compatible server and an in-process worker
(with a workflow cache, as deployed, so fast read-only tools are local activities; the probe tools
of tests/plugins/probe.py; the README's MCP tracker, examples/mcp_tracker), runs the scenarios of
ratchet/history_scenarios.py one by one, and writes each history exactly as
`temporal workflow show --output json` exports it: what `ratchet replay` and
tests/workflows/test_replay.py read. Payloads are never encrypted or claim-checked here (RATCHET_CODEC_KEYS
and RATCHET_CLAIM_CHECK_BYTES are ignored), so the files replay anywhere, on their own.

What differs between two recordings of unchanged code, legitimately:
- event times, and the times inside local-activity markers (`run.prepare`'s `complete_time`);
- run ids (`originalExecutionRunId`, `firstExecutionRunId`), request ids, `historySizeBytes`;
- `sdkMetadata.coreUsedFlags`, an unordered set listed in any order;
- the worker's `buildId`, a hash of the loaded code, so any code edit changes it;
- `lastFailure` stack traces of retried activities (line numbers, paths);
- tool output that is not reproducible: `run_command` reports test timings ("Ran 2 tests in
  0.001s"), and so the transcript artifact digests of the steps after it.
Kept fixed: workflow ids, task queues (the host queue too: RATCHET_HOST_ID is `histories-host`),
identity, workspace names, scripts and the API key (which never enters history), so a re-recording diff shows what really changed in the workflow.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import json
import logging
import subprocess
import sys
import tempfile
from pathlib import Path

from temporalio.client import Client

from ratchet.client import RatchetClient
from ratchet.payloads.converter import data_converter
from devtools.devserver import DevServer, temporal_binary
from devtools.histories.scenarios import SCENARIOS, TASK_QUEUE, Recorder, recorded_id
from ratchet.ops.process import exit_now
from ratchet.ops.settings import Settings
from ratchet.testing.anthropic_server import AnthropicServer
from ratchet.testing.openai_server import OpenAIServer

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "histories"
IDENTITY = "ratchet-record-histories"
API_KEY = "histories-key"
HOST_ID = "histories-host"


async def export(address: str, name: str, out: Path) -> Path:
    """`temporal workflow show --output json`, as a user exports a history."""
    cmd = [
        temporal_binary(), "workflow", "show", "--workflow-id", recorded_id(name), "--output", "json",
        "--no-json-shorthand-payloads", "--address", address,
    ]
    done = await asyncio.to_thread(subprocess.run, cmd, capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        raise RuntimeError(f"temporal workflow show failed: {done.stderr.strip()}")
    path = out / f"{name}.json"
    path.write_text(done.stdout if done.stdout.endswith("\n") else done.stdout + "\n")
    return path


def recording_settings(address: str, state: Path, openai_url: str, anthropic_url: str) -> Settings:
    os.environ.update(  # the providers' own settings
        OPENAI_BASE_URL=openai_url, OPENAI_API_KEY=API_KEY, OPENAI_MODEL="gpt-4o-mini",
        ANTHROPIC_BASE_URL=anthropic_url, ANTHROPIC_API_KEY=API_KEY, ANTHROPIC_MODEL="claude-sonnet-4-5",
    )
    return Settings(
        temporal_address=address, task_queue=TASK_QUEUE, max_cached_workflows=100,
        workspace_root=state / "workspaces", artifact_dir=state / "artifacts", ledger_path=state / "ledger.sqlite3",
        plugins="tests.plugins.probe,examples.mcp_tracker.profiles", codec_keys=None, claim_check_bytes=0,
        host_id=HOST_ID,  # the host queue `histories@histories-host` is in the history: not the machine's name
        mcp_servers=mcp_servers(state),
    )


def mcp_servers(state: Path) -> Path:
    """The README's MCP tracker (examples/mcp_tracker/servers.json), its database in `state`;
    `local` with a short timeout, so its read-only `search_issues` takes the local-activity fast path."""
    path = state / "mcp-servers.json"
    path.write_text(json.dumps({"servers": {"tracker": {
        "command": sys.executable, "args": [str(ROOT / "examples" / "mcp_tracker" / "tracker.py")],
        "env": {"TRACKER_DB": str(state / "mcp-tracker.db")}, "local": True, "timeout_s": 10,
    }}}))
    return path


async def record(names: list[str], out: Path) -> None:
    from ratchet.worker.main import build_worker, load_plugins

    with tempfile.TemporaryDirectory(prefix="ratchet-histories-") as tmp, OpenAIServer() as openai, \
            AnthropicServer() as anthropic:
        state = Path(tmp)
        with DevServer(db_file=state / "temporal.db", log_file=state / "server.log") as server:
            settings = recording_settings(server.address, state, openai.base_url, anthropic.base_url)
            os.environ["RATCHET_TRACKER_PATH"] = str(state / "tracker.sqlite3")  # the tracker tools read it
            load_plugins(settings)
            client = await Client.connect(server.address, identity=IDENTITY, data_converter=data_converter(settings))
            recorder = Recorder(RatchetClient(client, settings), settings, openai, API_KEY, anthropic)
            async with build_worker(client, settings):
                for name in names:
                    await SCENARIOS[name](recorder)
                    path = await export(server.address, name, out)
                    print(f"recorded {name}: {path}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devtools.histories.record", description="Record the replay corpus.")
    parser.add_argument("names", nargs="*", help=f"scenarios (default: all): {', '.join(SCENARIOS)}")
    parser.add_argument("--out", type=Path, default=OUT, help="folder to write to (default: tests/histories)")
    args = parser.parse_args(argv)
    unknown = [n for n in args.names if n not in SCENARIOS]
    if unknown:
        print(f"unknown scenarios {unknown}; known: {', '.join(SCENARIOS)}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    logging.getLogger("temporalio").setLevel(logging.ERROR)  # the scenarios fail tools on purpose
    asyncio.run(record(args.names or list(SCENARIOS), args.out.resolve()))
    return 0


if __name__ == "__main__":
    exit_now(main())
