"""MCP servers written with the official `mcp` SDK, run by the tests as real subprocesses (stdio) and
as real streamable-HTTP servers on loopback: `tracker.py` (a well-behaved issue tracker that counts
its side effects) and `hostile.py` (crashes, hangs, 20 MB, invalid results, a changing tool list)."""

import sys
from pathlib import Path

HERE = Path(__file__).parent
TRACKER = HERE / "tracker.py"
HOSTILE = HERE / "hostile.py"
PYTHON = sys.executable
