"""`make up`: a Temporal dev server and a Ratchet worker that stay up until Ctrl-C.

The set-up the README's sections after `make demo` assume. The dev server keeps its state in
`.ratchet/temporal.db` (a restart keeps every run), listens on 127.0.0.1:7233 with its Web UI on
8233 (another free port, said so, when one is taken), and has Ratchet's search attributes; the
worker (`python -m ratchet.worker`) runs with the default settings from the repository root, so its
workspaces, ledger and artifacts are the ones `ratchet` finds there. Once both are up it prints
the addresses and the lines that set up another terminal, then `READY`. Ctrl-C (or SIGTERM) drains
the worker and stops the server; a second Ctrl-C stops the worker at once.

    python -m devtools.up [--dir .ratchet] [--port 7233] [--ui-port 8233]

With `--dir` elsewhere, the worker's stores live there too and the printed lines export them.
"""

from __future__ import annotations

import argparse
import asyncio
import fcntl
import os
import shlex
import signal
import sys
from collections.abc import Callable
from pathlib import Path

from temporalio.client import Client

from devtools.devserver import TEMPORAL_PORT, UI_PORT, DevServer, pick_port
from devtools.workers import WorkerProcess
from ratchet.ops.search_attributes import SEARCH_ATTRIBUTES, ensure_search_attributes

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DIR = ROOT / ".ratchet"
READY = "ratchet is up"
"""The last line printed once the server and the worker are ready (tests wait for it)."""
STOPPED = "stopped the worker and the dev server"
STORES = (
    ("RATCHET_WORKSPACE_ROOT", "workspaces"),
    ("RATCHET_ARTIFACT_DIR", "artifacts"),
    ("RATCHET_LEDGER_PATH", "ledger.sqlite3"),
    ("RATCHET_TRACKER_PATH", "tracker.sqlite3"),
)
"""The worker's local stores: with a --dir other than .ratchet, they live there (unless set)."""
DEV_PROMOTE = "always"
"""On a development machine each start is the build new runs should get: the worker makes its build
current (runs pinned to an earlier build wait for a worker of it: `ratchet deploy status`)."""


def arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="make up", description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR, help="state and logs (default: .ratchet)")
    parser.add_argument("--port", type=int, default=TEMPORAL_PORT, help="Temporal's port, if free (default: 7233)")
    parser.add_argument("--ui-port", type=int, default=UI_PORT, help="the Web UI's port, if free (default: 8233)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = arguments(argv)
    state_dir = args.dir.resolve()
    state_dir.mkdir(parents=True, exist_ok=True)
    lock = open(state_dir / "up.lock", "a+")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:  # two servers on one SQLite file would corrupt it
        print(f"make up is already running on {state_dir} (stop it with Ctrl-C there)", file=sys.stderr)
        return 1
    other = _other_temporal_settings()
    for name in other:  # the dev server's own checks and the worker must not use them
        del os.environ[name]
    return asyncio.run(_up(state_dir, args.port, args.ui_port, unset=other))


async def _up(state_dir: Path, port: int, ui_port: int, unset: list[str]) -> int:
    server = DevServer(
        db_file=state_dir / "temporal.db",
        port=pick_port(port, "Temporal"),
        ui_port=pick_port(ui_port, "the Web UI"),
        log_file=state_dir / "temporal.log",
    )
    worker = WorkerProcess(
        [sys.executable, "-m", "ratchet.worker"],
        env=_worker_env(server, state_dir),
        cwd=ROOT,
        log=state_dir / "worker.log",
    )
    stop = _stop_on_signals(second=worker.kill)
    try:
        registered = await _start(server, worker)
        if registered is None:
            return 1
        if stop.is_set():  # Ctrl-C while starting
            return 0
        _show(server, worker, registered, shell_lines(server, state_dir, unset))
        return await _watch(server, worker, stop)
    finally:
        await _stop(server, worker)


async def _start(server: DevServer, worker: WorkerProcess) -> list[str] | None:
    """The server, its search attributes, then the worker: the attributes' names, or None (and why)."""
    print("starting the Temporal dev server and a worker ...", flush=True)
    try:
        await asyncio.to_thread(server.start)
        registered = await _search_attributes(server.address)
        await worker.start()
    except (RuntimeError, TimeoutError) as exc:  # their messages name the log to read
        print(f"make up: {exc}", file=sys.stderr, flush=True)
        return None
    return registered


async def _stop(server: DevServer, worker: WorkerProcess) -> None:
    """The worker drains (SIGTERM), then the server stops; each is killed if it does not in time."""
    await worker.terminate(timeout=30)
    await asyncio.to_thread(server.stop)
    print(STOPPED, flush=True)


def _stop_on_signals(second: Callable[[], None]) -> asyncio.Event:
    """An event set by the first SIGINT or SIGTERM; the next one calls `second`."""
    stop = asyncio.Event()

    def received() -> None:
        if stop.is_set():
            second()
        stop.set()

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, received)
    return stop


def _worker_env(server: DevServer, state_dir: Path) -> dict[str, str]:
    env = dict(os.environ, TEMPORAL_ADDRESS=server.address)
    env.setdefault("RATCHET_PROMOTE", DEV_PROMOTE)
    if state_dir != DEFAULT_DIR:
        for name, path in STORES:
            env.setdefault(name, str(state_dir / path))
    return env


async def _search_attributes(address: str) -> list[str]:
    """Ratchet's search attributes on the default namespace: the server registers them at start;
    this registers any an older state file lacks. Their names."""
    await ensure_search_attributes(await Client.connect(address))
    return list(SEARCH_ATTRIBUTES)


def _show(server: DevServer, worker: WorkerProcess, registered: list[str], lines: list[str]) -> None:
    where = _shown(server.db_file.parent)
    print(f"Temporal:  {server.address}   (dev server, state in {where}/temporal.db, log {where}/temporal.log)")
    print(f"Web UI:    {server.ui_url}")
    queues = (worker.ready_line or "").partition(": ")[2].strip()  # task queue 'ratchet' at ..., host queue ...
    print(f"worker:    {queues}   (pid {worker.pid}, log {where}/worker.log)")
    print(f"search attributes: {', '.join(registered)}")
    print("\nIn another terminal (the README's next sections assume these):\n")
    for line in lines:
        print(f"  {line}")
    print(f"\n{READY}: Ctrl-C stops the worker and the dev server.", flush=True)


def shell_lines(server: DevServer, state_dir: Path, unset: list[str]) -> list[str]:
    """What puts `temporal` and `ratchet` on PATH and points them at this server and these stores
    (`unset`: the Temporal settings of this terminal that point elsewhere)."""
    venv = Path(sys.prefix)
    activate = venv / "bin" / "activate"
    lines = [f"cd {shlex.quote(str(ROOT))}"]
    if activate.exists():
        lines[0] += f" && source {shlex.quote(_shown(activate))}"
    else:
        lines.append(f"export PATH={shlex.quote(str(Path(sys.executable).parent))}:$PATH")
    if unset:
        lines.append("unset " + " ".join(unset))
    lines.append(f"export TEMPORAL_ADDRESS={server.address}")
    if server.ui_port != UI_PORT or "RATCHET_TEMPORAL_UI_URL" in os.environ:  # `ratchet console`'s links
        lines.append(f"export RATCHET_TEMPORAL_UI_URL={server.ui_url}/namespaces/default")
    if state_dir != DEFAULT_DIR:
        lines.append("export " + " ".join(f"{name}={shlex.quote(str(state_dir / path))}" for name, path in STORES))
    return lines


def _other_temporal_settings() -> list[str]:
    """The TEMPORAL_* variables set here besides the address (an API key, TLS, a namespace or a
    profile): meant for another server, they would keep the dev server's clients from connecting."""
    return sorted(k for k in os.environ if k.startswith("TEMPORAL_") and k != "TEMPORAL_ADDRESS")


def _shown(path: Path) -> str:
    """`path` relative to the repository root when it is inside it."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


async def _watch(server: DevServer, worker: WorkerProcess, stop: asyncio.Event) -> int:
    """Until a signal (0), or until the server or the worker exits on its own (1)."""
    while not stop.is_set():
        if server.process is None or server.process.poll() is not None:
            print(f"the dev server exited; see {server.log_file}", file=sys.stderr, flush=True)
            return 1
        if not worker.alive():
            print(f"the worker exited ({worker.returncode}); see {worker.log}", file=sys.stderr, flush=True)
            return 1
        try:
            await asyncio.wait_for(stop.wait(), timeout=0.5)
        except TimeoutError:
            pass
    print("\nstopping ...", flush=True)
    return 0


if __name__ == "__main__":
    from ratchet.ops.process import exit_now

    exit_now(main())
