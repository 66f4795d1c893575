"""One bench worker process: `python -m bench.worker_proc KIND ADDRESS QUEUE ROOT`.

KIND is `floor` (raw SDK: temporalio and bench.floor only) or `ratchet` (the production worker,
`ratchet.worker.main.build_worker`, with RATCHET_PLUGINS=bench.plugin). Prints `READY <seconds since
start>` once polling; SIGTERM stops it. The parent measures its CPU and memory from /proc. With
BENCH_COUNT_STORES=1 a `ratchet` worker counts its ledger and artifact-store calls (bench.store_calls).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from pathlib import Path

from bench.store_calls import COUNT_ENV

BILLING_ENV = "BENCH_BILLING"
"""0: the worker has no billing ledger (bench/billing.py's baseline)."""

STARTED = time.monotonic()
READY = "READY "
"""The line a worker prints once runs can reach it: READY <seconds since start>. A raw SDK worker
can once it polls; a Ratchet worker is versioned, and new runs reach its deployment once a build of
it is current (a deployment's first worker registers its build with its first poll, then makes it
current: a worker start's cost, in `startup_s`, not the first run's)."""


async def floor_worker(address: str, queue: str):
    from temporalio.client import Client
    from temporalio.worker import Worker

    from bench.floor import ACTIVITIES, FloorLocalToolWorkflow, FloorSession, FloorWorkflow

    client = await Client.connect(address)
    workflows = [FloorWorkflow, FloorLocalToolWorkflow, FloorSession]
    return Worker(client, task_queue=queue, workflows=workflows, activities=ACTIVITIES)


async def ratchet_worker(address: str, queue: str, root: Path):
    from ratchet.ops.logs import configure_logging
    from ratchet.ops.settings import Settings
    from ratchet.worker.main import build_worker, connect, load_plugins

    settings = Settings(
        temporal_address=address, task_queue=queue, plugins="bench.plugin",
        workspace_root=root / "workspaces", artifact_dir=root / "artifacts",
        ledger_path=root / "ledger.sqlite3",
        search_attributes=os.environ.get("BENCH_SEARCH_ATTRIBUTES", "1") == "1",
        local_tools=os.environ.get("BENCH_LOCAL_TOOLS", "1") == "1",
    )
    os.environ["RATCHET_TRACKER_PATH"] = str(root / "tracker.sqlite3")  # the example tracker's own setting
    os.environ["RATCHET_SCRIPTED_CHARS_PER_S"] = os.environ.get("BENCH_SCRIPTED_CHARS_PER_S", "0")  # the provider's own
    configure_logging(settings)
    load_plugins(settings)
    billing = os.environ.get(BILLING_ENV, "1") == "1"
    if os.environ.get(COUNT_ENV) != "1" and billing:
        return build_worker(await connect(settings), settings)
    import dataclasses

    from bench.store_calls import counted_stores, counts_file
    from ratchet.plugin import RatchetOptions, RatchetPlugin
    from ratchet.stores.urls import open_artifacts, open_ledger

    ledger, artifacts = open_ledger(settings.ledger_store_url), open_artifacts(settings.artifact_store_url)
    if os.environ.get(COUNT_ENV) == "1":
        ledger, artifacts = counted_stores(ledger, artifacts, counts_file(root, queue))
    options = RatchetOptions.from_settings(settings, ledger=ledger, artifacts=artifacts)
    if not billing:  # bench/billing.py's baseline: no billing ledger (the bench's switch only)
        options = dataclasses.replace(options, billing=None)
    return build_worker(await connect(settings, plugin=RatchetPlugin(options)), settings)


async def routed_to(worker) -> None:
    """Until the worker's deployment has a current build (this one, when it is the first and makes
    itself current) and the routing reached its queues: runs started now reach a worker."""
    from ratchet.deploys.deployments import describe, settled

    name, pause = worker.config(active_config=True)["deployment_config"].version.deployment_name, 0.01
    while (found := await describe(worker.client, name)) is None or found.current is None:
        await asyncio.sleep(pause)
        pause = min(pause * 2, 0.2)
    await settled(worker.client, name)


async def main(kind: str, address: str, queue: str, root: Path) -> None:
    worker = await (floor_worker(address, queue) if kind == "floor" else ratchet_worker(address, queue, root))
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    async with worker:
        if kind != "floor":
            await routed_to(worker)
        print(f"{READY}{time.monotonic() - STARTED:.3f}", flush=True)
        await stop.wait()
        os._exit(0)  # no drain: the bench stops workers between cells, with nothing running


if __name__ == "__main__":
    kind, address, queue, root = sys.argv[1:5]
    try:
        asyncio.run(main(kind, address, queue, Path(root)))
    finally:
        sys.stdout.flush()
        os._exit(0)  # temporalio can abort at interpreter exit (SDK issue #300)
