"""The dev server every test, the bench and `make demo` start (devtools/devserver.py): its ports
come from below the kernel's ephemeral range, and a port taken at start is not fatal."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from devtools.devserver import DevServer, _ephemeral_low, free_port, port_open

REPO = Path(__file__).resolve().parents[2]


def test_free_ports_are_below_the_kernels_ephemeral_range():
    """The kernel hands ports of its ephemeral range to whoever binds port 0 next (the server's own
    internal services do): ours must not come from there."""
    low = _ephemeral_low()
    ports = {free_port() for _ in range(50)}
    assert all(port < low for port in ports), sorted(p for p in ports if p >= low)


def test_a_server_whose_port_was_taken_starts_on_another(tmp_path):
    taken = socket.socket()
    taken.bind(("127.0.0.1", free_port()))  # bound, not listening: nothing answers, the server cannot bind
    asked = taken.getsockname()[1]
    server = DevServer(db_file=tmp_path / "t.db", log_file=tmp_path / "server.log", port=asked)
    try:
        with server:
            assert server.port != asked and port_open(server.port)
        assert "address already in use" in (tmp_path / "server.log").read_text()
    finally:
        taken.close()


def test_a_worker_imports_no_client_library_until_a_call_needs_it():
    """The openai client is 20 MiB of a worker's memory, cryptography 6 and httpx 3.5: a worker (and
    the CLI) that never calls an OpenAI endpoint, holds no key and sends no notification or
    Anthropic request imports none of them."""
    code = (
        "import sys, worker.main, ratchet.worker.main, ratchet.cli.main\n"
        "from ratchet.models.builtin import builtin_providers\n"
        "from ratchet.stores.artifacts import DirectoryArtifactStore\n"
        "import tempfile, pathlib\n"
        "builtin_providers(DirectoryArtifactStore(pathlib.Path(tempfile.mkdtemp())))\n"
        "heavy = ('openai', 'anthropic', 'cryptography', 'httpx2')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stdout[-500:]
