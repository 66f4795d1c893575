"""Serving a Starlette app with uvicorn until it stops: what `ratchet serve` and `ratchet console`
share. The ready line names the address really bound (port 0: the one the system chose)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any


async def serve_app(app: Any, host: str, port: int, ready: Callable[[str], str]) -> int:
    """Serve `app`; once it listens, print `ready(base URL)`. 0 when it stopped, 1 if it never started."""
    import uvicorn

    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning"))
    started = asyncio.create_task(server.serve())
    while not server.started and not started.done():
        await asyncio.sleep(0.05)
    if server.started:
        bound = server.servers[0].sockets[0].getsockname()
        shown = "127.0.0.1" if host in ("0.0.0.0", "") else host
        print(ready(f"http://{shown}:{bound[1]}"), flush=True)
    await started
    return 0 if server.started else 1
