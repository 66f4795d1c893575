"""MCP servers written with the official `mcp` SDK, run by the tests as real subprocesses (stdio) and
as real streamable-HTTP servers on loopback: `tracker.py` (a well-behaved issue tracker that counts
its side effects) and `hostile.py` (crashes, hangs, 20 MB, invalid results, a changing tool list)."""

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from devtools.devserver import free_port

HERE = Path(__file__).parent
TRACKER = HERE.parent.parent / "examples" / "mcp_tracker" / "tracker.py"
"""The example tracker server (examples/mcp_tracker/): the README's MCP example and these tests' server."""
HOSTILE = HERE / "hostile.py"
PYTHON = sys.executable


@contextlib.contextmanager
def http_tracker(db: Path) -> Iterator[str]:
    """The tracker as a streamable-HTTP server on 127.0.0.1 (its base url), stopped on exit."""
    port = free_port()
    server = subprocess.Popen([PYTHON, str(TRACKER), "--http", str(port)], env={**os.environ, "TRACKER_DB": str(db)},
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the HTTP tracker did not start (exit code {server.poll()})") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.kill()
        server.wait()


def running(pid: int) -> bool:
    """Whether process `pid` still exists."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
