"""MCP call cost: one agent run whose steps alternate between `bench_echo` (a `@tool`) and the same
tool served by a local stdio MCP server (`bench__echo`, bench/mcp_echo.py), so both see the same
worker, server and load (issue 16).

One worker, both tools regular activities (RATCHET_LOCAL_TOOLS off: a read-only `@tool` would
otherwise run as a local activity, which an MCP server not marked `local` never does). A cold run
first (it starts the MCP server), outside the clock. Per call, the activity's scheduled -> completed
time by the server's clock: what a call costs the run, dispatch included. `mcp_call_ratio` is the
MCP tool's median over the `@tool`'s.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from statistics import median
from typing import Any

from temporalio.client import WorkflowHistory

from bench.harness import REPO, Env, Variant, check_result, machine_load, start_run
from bench.progress import Progress
from ratchet.contracts import AGENT_WORKFLOW

PROFILE = "bench_mcp"
"""bench/plugin.py: `bench_echo` and the MCP server `bench`'s tools."""
TOOL, MCP_TOOL = "tool.bench_echo", "mcp.bench"


def variant(root: Path) -> Variant:
    servers = root / "mcp-servers.json"
    servers.write_text(json.dumps({"servers": {"bench": {"command": sys.executable, "args": [str(REPO / "bench" / "mcp_echo.py")]}}}))
    return Variant("mcp", "ratchet", AGENT_WORKFLOW, profile=PROFILE,
                   env=(("RATCHET_MCP_SERVERS", str(servers)), ("BENCH_LOCAL_TOOLS", "0")),
                   label="bench_echo as a @tool and as an MCP tool (stdio), alternating in one run")


def run_input(root: Path, steps: int) -> dict[str, Any]:
    name = f"script-mcp-{steps}.json"
    path = root / "workspaces" / "bench" / name
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        calls = [{"tool_calls": [{"name": "bench_echo" if i % 2 == 0 else "bench__echo", "arguments": {"text": str(i)}}]}
                 for i in range(steps)]
        path.write_text(json.dumps([*calls, {"content": "done"}]))
    return {"agent": PROFILE, "objective": f"bench {steps} calls", "workspace": "bench",
            "model": {"script_file": name}, "budget": {"max_steps": steps + 1}}


def call_ms(history: WorkflowHistory) -> dict[str, list[float]]:
    """Scheduled -> completed of each tool activity, by type (server clock)."""
    scheduled: dict[int, tuple[str, float]] = {}
    out: dict[str, list[float]] = {TOOL: [], MCP_TOOL: []}
    for event in history.events:
        t = event.event_time.seconds + event.event_time.nanos / 1e9
        if event.HasField("activity_task_scheduled_event_attributes"):
            scheduled[event.event_id] = (event.activity_task_scheduled_event_attributes.activity_type.name, t)
        elif event.HasField("activity_task_completed_event_attributes"):
            kind, began = scheduled[event.activity_task_completed_event_attributes.scheduled_event_id]
            if kind in out:
                out[kind].append((t - began) * 1000)
    return out


async def mcp_cost(env: Env, progress: Progress, steps: int, runs: int) -> list[dict[str, Any]]:
    """`runs` timed runs of `steps` alternating calls after a cold one; a cell per run."""
    mcp = variant(env.root)
    cells = []
    async with env.worker(mcp) as worker:
        for i in range(runs + 1):
            progress.begin(f"mcp: {steps} calls alternating @tool and MCP, run {i}/{runs}{' (cold)' if i == 0 else ''}")
            handle = await start_run(env, mcp, steps, worker.queue, run_input(env.root, steps))
            check_result(mcp, steps, await handle.result())
            ms = call_ms(await handle.fetch_history())
            if i > 0:
                cells.append({"run": i, "steps": steps, "tool_ms": median(ms[TOOL]), "mcp_ms": median(ms[MCP_TOOL]),
                              "calls": len(ms[TOOL]) + len(ms[MCP_TOOL]), "load": machine_load()})
            progress.end(f"@tool {median(ms[TOOL]):.1f} ms, MCP {median(ms[MCP_TOOL]):.1f} ms per call (median)")
    return cells


def mcp_figures(cells: list[dict[str, Any]]) -> dict[str, float]:
    if not cells:
        return {}
    tool, mcp = median(c["tool_ms"] for c in cells), median(c["mcp_ms"] for c in cells)
    return {"mcp_call_ratio": mcp / tool, "mcp_call_ms_delta": mcp - tool}


def mcp_rows(cells: list[dict[str, Any]]) -> tuple[list[str], list[list[Any]]]:
    header = ["run", "N", "@tool ms/call (median)", "MCP ms/call (median)", "calls"]
    return header, [[c["run"], c["steps"], c["tool_ms"], c["mcp_ms"], c["calls"]] for c in cells]
