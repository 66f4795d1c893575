"""MCP call cost: one agent run whose steps take turns between `bench_echo` (a `@tool`) and the
same tool on two local stdio MCP servers, so all three see the same worker, server and load (issue 16):

- `lean__echo` on bench/mcp_lean.py, a server that spends tens of microseconds on a call: the cost
  is Ratchet's (its client, the activity) plus the hop to another process. `mcp_call_ratio` is this
  tool's median over the `@tool`'s.
- `sdk__echo` on bench/mcp_echo.py, the official Python SDK's `MCPServer`, which spends 1.5 to 2 ms
  of its own on a call (a raw client measures it: docs/ARCHITECTURE.md). `mcp_sdk_server_call_ratio`
  is its median over the `@tool`'s: what a typical Python server costs a run.

One worker, all three regular activities (RATCHET_LOCAL_TOOLS off: a read-only `@tool` would
otherwise run as a local activity, which an MCP server not marked `local` never does). A cold run
first (it starts the MCP servers), outside the clock. Per call, the activity's scheduled ->
completed time by the server's clock: what a call costs the run, dispatch included.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from statistics import median
from typing import Any

from temporalio.client import WorkflowHistory

from bench.harness import REPO, Env, Variant, check_result, machine_load, run_history, start_run
from bench.progress import Progress
from ratchet.contracts import AGENT_WORKFLOW
from ratchet.mcp.config import McpServer
from ratchet.mcp.pool import McpPool

PROFILE = "bench_mcp"
"""bench/plugin.py: `bench_echo` and the tools of the MCP servers `lean` and `sdk`."""
TOOLS = {"tool.bench_echo": "bench_echo", "mcp.lean": "lean__echo", "mcp.sdk": "sdk__echo"}
"""Activity type -> the name the model calls, in the order the steps take turns."""


SERVERS = {
    "lean": {"command": sys.executable, "args": [str(REPO / "bench" / "mcp_lean.py")]},
    "sdk": {"command": sys.executable, "args": [str(REPO / "bench" / "mcp_echo.py")]},
}
ROUND_TRIPS, ROUND_TRIP_GAP_S = 50, 0.01


def variant(root: Path) -> Variant:
    servers = root / "mcp-servers.json"
    servers.write_text(json.dumps({"servers": SERVERS}))
    return Variant("mcp", "ratchet", AGENT_WORKFLOW, profile=PROFILE,
                   env=(("RATCHET_MCP_SERVERS", str(servers)), ("BENCH_LOCAL_TOOLS", "0")),
                   label="bench_echo as a @tool and on two stdio MCP servers, taking turns in one run")


def run_input(root: Path, steps: int) -> dict[str, Any]:
    name = f"script-mcp-{steps}.json"
    path = root / "workspaces" / "bench" / name
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        names = list(TOOLS.values())
        calls = [{"tool_calls": [{"name": names[i % len(names)], "arguments": {"text": str(i)}}]} for i in range(steps)]
        path.write_text(json.dumps([*calls, {"content": "done"}]))
    return {"agent": PROFILE, "objective": f"bench {steps} calls", "workspace": "bench",
            "model": {"provider": "scripted", "options": {"script_file": name}}, "budget": {"max_steps": steps + 1}}


def call_ms(history: WorkflowHistory) -> dict[str, list[float]]:
    """Scheduled -> completed of each tool activity, by type (server clock)."""
    scheduled: dict[int, tuple[str, float]] = {}
    out: dict[str, list[float]] = {kind: [] for kind in TOOLS}
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
    """`runs` timed runs of `steps` calls taking turns, after a cold one; a cell per run."""
    mcp = variant(env.root)
    cells = []
    async with env.worker(mcp) as worker:
        for i in range(runs + 1):
            progress.begin(f"mcp: {steps} calls, @tool and two MCP servers taking turns, run {i}/{runs}{' (cold)' if i == 0 else ''}")
            handle = await start_run(env, mcp, steps, worker.queue, run_input(env.root, steps))
            check_result(mcp, steps, await handle.result())
            ms = call_ms(await run_history(handle))
            tool, lean, sdk = (median(ms[kind]) for kind in TOOLS)
            if i > 0:
                trips = await round_trips()
                cells.append({"run": i, "steps": steps, "tool_ms": tool, "lean_ms": lean, "sdk_ms": sdk,
                              "lean_trip_ms": trips["lean"], "sdk_trip_ms": trips["sdk"],
                              "calls": sum(len(v) for v in ms.values()), "load": machine_load()})
            progress.end(f"@tool {tool:.1f} ms, MCP lean server {lean:.1f} ms, SDK server {sdk:.1f} ms per call (median)")
    return cells


async def round_trips() -> dict[str, float]:
    """Per server, the median `tools/call` round trip through Ratchet's own client outside any
    activity, one call every ROUND_TRIP_GAP_S as in a run: the server's own work plus the hop."""
    pool = McpPool([McpServer(name=name, **spec) for name, spec in SERVERS.items()])
    out = {}
    try:
        for name in SERVERS:
            await pool.list_tools(name)  # started, outside the clock
            took = []
            for i in range(ROUND_TRIPS):
                began = time.perf_counter()
                async with pool.session(name) as session:
                    await session.call("echo", {"text": str(i)}, f"bench-{i}", timeout_s=10)
                took.append((time.perf_counter() - began) * 1000)
                await asyncio.sleep(ROUND_TRIP_GAP_S)
            out[name] = median(took)
    finally:
        await pool.aclose()
    return out


def mcp_figures(cells: list[dict[str, Any]]) -> dict[str, float]:
    if not cells:
        return {}
    tool, lean, sdk = (median(c[key] for c in cells) for key in ("tool_ms", "lean_ms", "sdk_ms"))
    return {"mcp_call_ratio": lean / tool, "mcp_call_ms_delta": lean - tool,
            "mcp_sdk_server_call_ratio": sdk / tool, "mcp_sdk_server_call_ms_delta": sdk - tool}


def mcp_rows(cells: list[dict[str, Any]]) -> tuple[list[str], list[list[Any]]]:
    header = ["run", "N", "@tool ms/call", "MCP, lean server ms/call", "MCP, SDK server ms/call",
              "lean server round trip ms", "SDK server round trip ms", "calls"]
    return header, [[c["run"], c["steps"], c["tool_ms"], c["lean_ms"], c["sdk_ms"], c["lean_trip_ms"], c["sdk_trip_ms"], c["calls"]]
                    for c in cells]
