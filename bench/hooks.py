"""Webhooks in under measure (issue 43): `ratchet serve` in its own process with one hook, and
`deliveries` signed deliveries posted one after another by a plain HTTP client, each starting a
run of the `bench` profile on the bench's worker. `hook_start_ms`: from just before the request
to its run's first workflow task starting (the server's event time; client and server share the
machine's clock), p50 and p99: the time a sender waits for an agent to begin, through the HMAC
check, the template, the client's start and the server's dispatch to a worker.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import sys
import time
import uuid
from typing import Any

from temporalio.api.enums.v1 import EventType

from bench.harness import REPO, VARIANTS, Env
from bench.history import percentile
from bench.progress import Progress
from devtools.workers import WorkerProcess

SECRET = "bench-hook-secret"
SCRIPT = {"provider": "scripted", "options": {"script": [{"content": "done"}]}}
HOOK = {"secret": "${BENCH_HOOK_SECRET}", "run": {"agent": "bench", "objective": "{text}", "model": SCRIPT}}


async def hooks_cost(env: Env, progress: Progress, deliveries: int) -> dict[str, Any]:
    import httpx2 as httpx

    hooks = env.root / "hooks.json"
    hooks.write_text(json.dumps({"hooks": {"bench": HOOK}}))
    async with env.worker(VARIANTS["ratchet"]) as worker:
        serve = WorkerProcess(
            [sys.executable, "-m", "ratchet.cli.main", "serve", "--port", "0"],
            env={**os.environ, "PYTHONPATH": str(REPO), "TEMPORAL_ADDRESS": env.address,
                 "RATCHET_LEDGER_PATH": str(env.root / "ledger.sqlite3"),
                 "RATCHET_TASK_QUEUE": worker.queue, "RATCHET_HOOKS": str(hooks), "BENCH_HOOK_SECRET": SECRET},
            cwd=REPO, log=env.root / "serve.log", ready="ratchet serve on", name="ratchet serve",
        )
        async with serve:
            base = (serve.ready_line or "").split("ratchet serve on", 1)[1].split()[0].rstrip("/")
            progress.begin(f"hooks: {deliveries} signed deliveries, each a run")
            async with httpx.AsyncClient(base_url=base, timeout=60) as http:
                for _ in range(3):  # warm: the server's client and connection, outside the clock
                    await _deliver(http)
                sent = [await _deliver(http) for _ in range(deliveries)]
            waits = [await _first_task_ms(env, run_id, at) for run_id, at in sent]
            progress.end(f"p50 {percentile(waits, 50):.0f} ms, p99 {percentile(waits, 99):.0f} ms")
    return {"deliveries": deliveries, "start_ms": waits}


async def _deliver(http: Any) -> tuple[str, float]:
    body = json.dumps({"text": "bench hook"}).encode()
    headers = {
        "Content-Type": "application/json",
        "X-GitHub-Delivery": uuid.uuid4().hex,
        "X-Hub-Signature-256": "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest(),
    }
    at = time.time()
    answer = await http.post("/hooks/bench", content=body, headers=headers)
    if answer.status_code != 202:
        raise RuntimeError(f"hooks: POST /hooks/bench answered {answer.status_code}: {answer.text}")
    return answer.json()["run_id"], at


async def _first_task_ms(env: Env, run_id: str, sent_at: float) -> float:
    handle = env.raw.get_workflow_handle(run_id)
    await handle.result()
    async for event in handle.fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED:
            return (event.event_time.ToDatetime().timestamp() - sent_at) * 1000
    raise RuntimeError(f"hooks: run {run_id} has no workflow task")


def hooks_figures(section: dict[str, Any]) -> dict[str, float]:
    waits = section.get("start_ms") or []
    if not waits:
        return {}
    return {"hook_start_p50_ms": percentile(waits, 50), "hook_start_p99_ms": percentile(waits, 99)}
