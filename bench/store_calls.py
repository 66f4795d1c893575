"""Counting a worker's store calls: how many ledger and artifact-store calls a step makes.

A bench worker started with BENCH_COUNT_STORES=1 wraps its ledger and artifact store in `Counted`
and, on SIGUSR1, writes the counts so far to a JSON file that the bench reads (`read_counts`):
`{prefix}.{method}` calls, and `cpu_us:{prefix}.{method}` the CPU microseconds the worker process
spent while they ran (`time.process_time`: the artifact store's client, obstore, does its network
work on threads of its own, which the calling thread's clock would miss; the bench's steps run one
at a time, so little else runs meanwhile).
With the Postgres ledger a call is one round trip (two or three for `begin` of a key that
exists, five for `claim`); with the S3 store one request (two for a put of a blob over 1 MiB).
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

COUNT_ENV = "BENCH_COUNT_STORES"
CPU_PREFIX = "cpu_us:"
"""Counts under this prefix are the process's CPU microseconds during those calls."""


class Counted:
    """`store` with its public method calls counted as `{prefix}.{method}` in `counts`, and their
    process CPU time as `cpu_us:{prefix}.{method}` (the calls themselves unchanged; safe from
    several threads)."""

    def __init__(self, store: Any, prefix: str, counts: Counter[str], lock: threading.Lock) -> None:
        self._store, self._prefix, self._counts, self._lock = store, prefix, counts, lock

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._store, name)
        if name.startswith("_") or not callable(attr):
            return attr

        def counted(*args: Any, **kwargs: Any) -> Any:
            began = time.process_time()
            try:
                return attr(*args, **kwargs)
            finally:
                cpu_us = round((time.process_time() - began) * 1e6)
                with self._lock:
                    self._counts[f"{self._prefix}.{name}"] += 1
                    self._counts[f"{CPU_PREFIX}{self._prefix}.{name}"] += cpu_us

        return counted

    def __repr__(self) -> str:
        return f"Counted({self._store!r})"


def counted_stores(ledger: Any, artifacts: Any, out: Path) -> tuple[Counted, Counted]:
    """Both stores counted; SIGUSR1 writes the counts to `out` (replaced atomically)."""
    counts: Counter[str] = Counter()
    lock = threading.Lock()

    def dump(*_: object) -> None:
        with lock:
            data = dict(counts)
        tmp = out.with_suffix(".tmp")
        tmp.write_text(json.dumps(data))
        tmp.replace(out)

    signal.signal(signal.SIGUSR1, dump)
    return Counted(ledger, "ledger", counts, lock), Counted(artifacts, "artifacts", counts, lock)


def counts_file(root: Path, queue: str) -> Path:
    return Path(root) / f"{queue}.stores.json"


def read_counts(pid: int, path: Path, timeout_s: float = 10.0) -> dict[str, int]:
    """Ask the worker `pid` for its counts (SIGUSR1) and read them from `path`."""
    path.unlink(missing_ok=True)
    os.kill(pid, signal.SIGUSR1)
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"worker {pid} wrote no store counts to {path}")
        time.sleep(0.02)
    return json.loads(path.read_text())
