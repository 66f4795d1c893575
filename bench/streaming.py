"""Streaming on against off, in the same worker and the same run of the bench (issue 23).

The scripted provider writes every reply at `CHARS_PER_S` (BENCH_SCRIPTED_CHARS_PER_S), streamed
or not: a step is a reply of `REPLY_CHARS` characters with a `bench_echo` call. Runs alternate
`model.stream` on and off, `reps` of each: `stream_step_time_ratio` (ms/step), `stream_history_bytes_ratio`
(history bytes/step), `stream_worker_cpu_ratio` (worker CPU/step) are on over off.

Latency: `concurrent` runs streaming at once, each read by a `ratchet.client` subscriber; then as
many read by SSE clients of `ratchet serve`; per text event, its arrival time minus its `sent_s` (the batch's
send time in the activity, the same machine's clock): `stream_latency_{subscriber,sse}_{p50,p99}_ms`,
over the deltas sent once the reader's stream was open (its checks answered: for SSE, the response's
headers), as a reader that joins a run late reads what was sent before it at once, not live.
These runs write at a model's pace (`LATENCY_CHARS_PER_S`, about 100 tokens a second: replies of
`LATENCY_REPLY_CHARS` take 3 s), not the cost cells' tenth of a second a reply: 20 runs of those
would ask more steps a second than this machine's server and worker can take (bench `throughput`),
and the latency measured would be the queue's.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
import time
import uuid
from pathlib import Path
from statistics import median
from typing import Any

from bench.harness import REPO, Env, Variant, machine_load
from bench.history import analyze, percentile
from bench.progress import Progress
from devtools.workers import WorkerProcess
from ratchet.contracts import AGENT_WORKFLOW

CHARS_PER_S = 2000
REPLY_CHARS = 200
VARIANT = Variant(
    "stream",
    "ratchet",
    AGENT_WORKFLOW,
    env=(("BENCH_SCRIPTED_CHARS_PER_S", str(CHARS_PER_S)),),
    label=f"Ratchet, replies of {REPLY_CHARS} characters written at {CHARS_PER_S}/s",
)
LATENCY_CHARS_PER_S = 400
LATENCY_REPLY_CHARS = 1200
LATENCY_STEPS = 3
LATENCY_VARIANT = Variant(
    "stream_latency",
    "ratchet",
    AGENT_WORKFLOW,
    env=(("BENCH_SCRIPTED_CHARS_PER_S", str(LATENCY_CHARS_PER_S)),),
    label=f"Ratchet, replies of {LATENCY_REPLY_CHARS} characters written at {LATENCY_CHARS_PER_S}/s",
)


def run_input(root: Path, steps: int, stream: bool, reply_chars: int = REPLY_CHARS) -> dict[str, Any]:
    name = f"script-stream-{steps}-{reply_chars}.json"
    path = root / "workspaces" / "bench" / name
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        sentence = "The next step echoes a number; "
        text = (sentence * (reply_chars // len(sentence) + 1))[:reply_chars]
        calls = [
            {"content": text, "tool_calls": [{"name": "bench_echo", "arguments": {"text": str(i)}}]}
            for i in range(steps)
        ]
        path.write_text(json.dumps([*calls, {"content": text}]))
    return {
        "agent": "bench",
        "objective": f"bench {steps} streamed steps",
        "workspace": "bench",
        "model": {"provider": "scripted", "options": {"script_file": name}, "stream": stream},
        "budget": {"max_steps": steps + 1},
    }


async def one_run(env: Env, queue: str, steps: int, stream: bool, reply_chars: int = REPLY_CHARS) -> Any:
    return await env.ratchet.start_workflow(
        AGENT_WORKFLOW,
        run_input(env.root, steps, stream, reply_chars),
        id=f"bench-stream-{uuid.uuid4().hex[:10]}",
        task_queue=queue,
    )


async def stream_cost(
    env: Env, progress: Progress, steps: int, reps: int, concurrent: int, latency_steps: int = LATENCY_STEPS
) -> dict[str, Any]:
    cells = []
    async with env.worker(VARIANT) as worker:
        await (await one_run(env, worker.queue, 2, True)).result()  # warm, outside the clock
        for rep in range(reps):
            for stream in (True, False) if rep % 2 == 0 else (False, True):
                progress.begin(f"stream: {steps} steps, streaming {'on' if stream else 'off'}, rep {rep + 1}/{reps}")
                before, began = worker.stats()["cpu_s"], time.perf_counter()
                handle = await one_run(env, worker.queue, steps, stream)
                result = await handle.result()
                wall, cpu = time.perf_counter() - began, worker.stats()["cpu_s"] - before
                if (result["phase"], result["steps"]) != ("DONE", steps + 1):
                    raise RuntimeError(f"streamed bench run ended wrongly: {result!r}")
                history = analyze(await handle.fetch_history(), "model.call")
                cells.append(
                    {
                        "stream": stream,
                        "rep": rep,
                        "ms_per_step": wall / steps * 1000,
                        "cpu_ms_per_step": cpu / steps * 1000,
                        "bytes_per_step": history.bytes / steps,
                        "events_per_step": history.events / steps,
                        "load": machine_load(),
                    }
                )
                progress.end(f"{cells[-1]['ms_per_step']:.0f} ms/step, {cells[-1]['bytes_per_step']:.0f} B/step")
    async with env.worker(LATENCY_VARIANT) as worker:
        progress.begin(f"stream: latency, {concurrent} runs streaming at once")
        latency = await latencies(env, worker.queue, latency_steps, concurrent)
        progress.end(
            f"subscriber p50 {percentile(latency['subscriber'], 50):.0f} ms, "
            f"SSE p50 {percentile(latency['sse'], 50):.0f} ms"
        )
    return {"cells": cells, "latency_ms": latency}


async def latencies(env: Env, queue: str, steps: int, concurrent: int) -> dict[str, list[float]]:
    from ratchet.client import RatchetClient
    from ratchet.contracts.events import TextDelta

    client = RatchetClient(env.ratchet, env.settings.model_copy(update={"task_queue": queue}))
    port = _free_port()
    serve = WorkerProcess(
        [sys.executable, "-m", "ratchet.cli.main", "serve", "--port", str(port)],
        env={**os.environ, "PYTHONPATH": str(REPO), "TEMPORAL_ADDRESS": env.address,
             "RATCHET_LEDGER_PATH": str(env.root / "ledger.sqlite3"), "RATCHET_TASK_QUEUE": queue},
        cwd=REPO,
        log=env.root / "serve.log",
        ready="ratchet serve on",
        name="ratchet serve",
    )
    out: dict[str, list[float]] = {"subscriber": [], "sse": []}

    def arrived(reader: str, sent_s: float, opened_s: float) -> None:
        if sent_s >= opened_s:  # sent before the reader was there: its wait is not the stream's
            out[reader].append((time.time() - sent_s) * 1000)

    async def subscriber(run) -> None:
        events = await run.open_stream(topics=["tokens"])
        opened_s = time.time()
        async for event in events:
            if isinstance(event, TextDelta):
                arrived("subscriber", event.sent_s, opened_s)

    async def sse(http, workflow_id: str) -> None:
        url = f"http://127.0.0.1:{port}/runs/{workflow_id}/events?topics=tokens"
        async with http.stream("GET", url) as response:
            opened_s = time.time()  # the server has checked the run and opened its stream
            async for line in response.aiter_lines():
                if line.startswith("data:"):
                    event = json.loads(line[5:])
                    if event.get("kind") == "text":
                        arrived("sse", event["sent_s"], opened_s)

    import httpx2 as httpx

    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    async with serve, httpx.AsyncClient(timeout=None, limits=limits) as http:
        for read in (lambda h: subscriber(client.get(h.id)), lambda h: sse(http, h.id)):  # one kind at a time
            handles = [await one_run(env, queue, steps, True, LATENCY_REPLY_CHARS) for _ in range(concurrent)]
            await asyncio.wait_for(asyncio.gather(*(read(h) for h in handles)), 600)
            for h in handles:
                await h.result()
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stream_figures(section: dict[str, Any]) -> dict[str, float]:
    if not section or not section.get("cells"):
        return {}
    cells = section["cells"]
    figures = {}
    for key, name in (
        ("ms_per_step", "stream_step_time_ratio"),
        ("bytes_per_step", "stream_history_bytes_ratio"),
        ("cpu_ms_per_step", "stream_worker_cpu_ratio"),
    ):
        on = median(c[key] for c in cells if c["stream"])
        off = median(c[key] for c in cells if not c["stream"])
        figures[name] = on / off if off else 0.0
    for reader, values in section["latency_ms"].items():
        figures[f"stream_latency_{reader}_p50_ms"] = percentile(values, 50)
        figures[f"stream_latency_{reader}_p99_ms"] = percentile(values, 99)
    return figures


def stream_rows(section: dict[str, Any]) -> tuple[list[str], list[list[Any]]]:
    header = ["streaming", "rep", "ms/step", "worker CPU ms/step", "history B/step", "events/step"]
    return header, [
        [
            "on" if c["stream"] else "off",
            c["rep"],
            c["ms_per_step"],
            c["cpu_ms_per_step"],
            c["bytes_per_step"],
            c["events_per_step"],
        ]
        for c in section.get("cells", [])
    ]
