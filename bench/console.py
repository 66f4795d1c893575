"""`ratchet console`'s pages under load (issue 25): the runs page with `runs` finished runs in
visibility, and the page of a run of `steps` verified steps (a session idle after its first turn,
so a checkpoint per step), then the same run's page once it has closed (`closed_run`: the first
load replays its history on the worker, `console_closed_run_first_ms`; the console keeps the state,
so the loads after it read no history), each loaded `samples` times by a plain HTTP client as a
browser loads it.

A load: GET the page (`ttfb`: from the request to its first byte), then at once, in parallel, the
static files it links and, on a running run's page, the stream console.js opens at load (until
its first byte); `last`: from the page's request to the end of the last of these. The console is
`ratchet console` in its own process on the bench's dev server; the worker another.
Figures: `console_{runs,run,closed_run}_{ttfb,last}_{p50,p99}_ms` (targets 300 ms and 1 s).
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
import time
from typing import Any

from bench.harness import REPO, Env, Variant, script_file
from bench.history import percentile
from bench.progress import Progress
from devtools.workers import WorkerProcess
from ratchet.client import RatchetClient
from ratchet.contracts import AGENT_WORKFLOW, RunAttributes

VARIANT = Variant("console", "ratchet", AGENT_WORKFLOW, profile="bench_verify", tool="bench_note",
                  label="Ratchet, bench_note steps, each verified and checkpointed")
PAGES = ("runs", "run", "closed_run")
ASSET = re.compile(r'(?:href|src)="(/static/[^"]+)"')
LIVE = re.compile(r'data-events="([^"]+)" data-from="(\d+)" data-running="1"')


def filler() -> dict[str, Any]:
    """A run that answers at once: one model call, no tool."""
    return {"agent": "bench", "objective": "fill visibility",
            "model": {"provider": "scripted", "options": {"script": [{"content": "done"}]}}}


def long_run(env: Env, steps: int) -> dict[str, Any]:
    return {"agent": VARIANT.profile, "objective": f"bench {steps} verified steps", "workspace": "bench",
            "session": {}, "budget": {"max_steps": steps + 10},
            "model": {"provider": "scripted", "options": {"script_file": script_file(env.root, steps, VARIANT.tool)}}}


async def count(env: Env, query: str) -> int:
    return (await env.raw.count_workflows(query)).count


async def fill(env: Env, client: RatchetClient, queue: str, runs: int) -> None:
    """`runs` finished runs in visibility, started fifty at a time."""
    for at in range(0, runs, 50):
        await asyncio.gather(*(client.start(filler()) for _ in range(min(50, runs - at))))
    query = f'TaskQueue="{queue}" AND ExecutionStatus="Completed"'
    while await count(env, query) < runs:
        await asyncio.sleep(0.5)


async def until_idle(env: Env, workflow_id: str) -> None:
    query = f'WorkflowId="{workflow_id}" AND {RunAttributes.PHASE}="AWAITING_MESSAGE"'
    while await count(env, query) < 1:
        await asyncio.sleep(0.5)


async def load(http: Any, path: str) -> tuple[float, float]:
    """(ttfb, last) in ms of one page load as a browser makes it (see the module's docstring)."""
    began = time.perf_counter()
    async with http.stream("GET", path) as response:
        chunks = response.aiter_bytes()
        first = await anext(chunks)
        ttfb = time.perf_counter() - began
        body = first + b"".join([c async for c in chunks])
    if response.status_code != 200:
        raise RuntimeError(f"console: GET {path} answered {response.status_code}")
    text = body.decode()
    follow = [http.get(asset) for asset in ASSET.findall(text)]
    live = LIVE.search(text)
    if live:
        follow.append(_stream_open(http, f"{live.group(1)}?from_offset={live.group(2)}"))
    await asyncio.gather(*follow)
    return ttfb * 1000, (time.perf_counter() - began) * 1000


async def _stream_open(http: Any, path: str) -> None:
    async with http.stream("GET", path) as response:
        await anext(response.aiter_bytes())


async def console_cost(env: Env, progress: Progress, runs: int, steps: int, samples: int) -> dict[str, Any]:
    import httpx2 as httpx

    async with env.worker(VARIANT) as worker:
        client = env.runs(worker.queue)
        progress.begin(f"console: {runs} runs in visibility, a session of {steps} verified steps")
        await fill(env, client, worker.queue, runs)
        session = await client.start(long_run(env, steps))  # the newest: on the first runs page too
        await until_idle(env, session.workflow_id)
        progress.end("ready")
        console = WorkerProcess(
            [sys.executable, "-m", "ratchet.cli.main", "console", "--port", "0"],
            env={**os.environ, "PYTHONPATH": str(REPO), "TEMPORAL_ADDRESS": env.address,
                 "RATCHET_LEDGER_PATH": str(env.root / "ledger.sqlite3"),
                 "RATCHET_TASK_QUEUE": worker.queue, "RATCHET_ARTIFACT_DIR": str(env.root / "artifacts")},
            cwd=REPO, log=env.root / "console.log", ready="ratchet console on", name="ratchet console",
        )
        out: dict[str, Any] = {"runs": runs, "steps": steps, "samples": samples}
        async with console:
            base = (console.ready_line or "").split("ratchet console on", 1)[1].strip().rstrip("/")
            paths = {"runs": "/", "run": f"/runs/{session.workflow_id}", "closed_run": f"/runs/{session.workflow_id}"}
            async with httpx.AsyncClient(base_url=base, timeout=60) as http:
                for name in PAGES:
                    if name == "closed_run":
                        await session.close()  # possible: the loads' streams shared one reader of the run
                        await session.result()
                        out["closed_run_first_ms"] = (await load(http, paths["run"]))[1]
                    progress.begin(f"console: the {name} page, {samples} loads")
                    for _ in range(3):  # warm: the console's connection and caches, outside the clock
                        await load(http, paths[name])
                    times = [await load(http, paths[name]) for _ in range(samples)]
                    out[name] = {"ttfb_ms": [t[0] for t in times], "last_ms": [t[1] for t in times]}
                    progress.end(f"ttfb p50 {percentile(out[name]['ttfb_ms'], 50):.0f} ms, "
                                 f"last p50 {percentile(out[name]['last_ms'], 50):.0f} ms")
    return out


def console_figures(section: dict[str, Any]) -> dict[str, float]:
    figures: dict[str, float] = {}
    for name in PAGES:
        for measure in ("ttfb", "last"):
            values = (section.get(name) or {}).get(f"{measure}_ms") or []
            if values:
                figures[f"console_{name}_{measure}_p50_ms"] = percentile(values, 50)
                figures[f"console_{name}_{measure}_p99_ms"] = percentile(values, 99)
    if "closed_run_first_ms" in section:
        figures["console_closed_run_first_ms"] = section["closed_run_first_ms"]
    return figures


def console_rows(section: dict[str, Any]) -> tuple[list[str], list[list[Any]]]:
    header = ["page", "loads", "TTFB p50 ms", "TTFB p99 ms", "last request p50 ms", "last request p99 ms"]
    rows = []
    for name in PAGES:
        if section.get(name):
            ttfb, last = section[name]["ttfb_ms"], section[name]["last_ms"]
            rows.append([name, len(ttfb), percentile(ttfb, 50), percentile(ttfb, 99), percentile(last, 50),
                         percentile(last, 99)])
    return header, rows
