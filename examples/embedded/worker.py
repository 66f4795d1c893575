"""An application's worker with Ratchet inside: its own workflow beside `AgentWorkflow`, one
`RatchetPlugin` wiring Ratchet's activities and backends from the environment (RATCHET_*,
TEMPORAL_*). `python -m examples.embedded.worker`; SIGTERM drains it."""

from __future__ import annotations

import asyncio
import signal

from temporalio.worker import Worker

from examples.embedded.workflows import ReleaseNotes
from ratchet import RatchetOptions, RatchetPlugin
from ratchet.ops.settings import load_settings
from ratchet.plugin import connect

READY = "embedded worker ready"


async def main() -> None:
    settings = load_settings()
    client = await connect(settings, plugin=RatchetPlugin(RatchetOptions.from_settings(settings)))
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    async with Worker(client, task_queue=settings.task_queue, workflows=[ReleaseNotes]):
        print(READY, flush=True)
        await stop.wait()


if __name__ == "__main__":
    from ratchet.ops.process import exit_now

    asyncio.run(main())
    exit_now(0)
