"""Where the worker's time goes: py-spy samples of a floor and a Ratchet worker on the same task.

py-spy attaches to the worker process (`--gil`: only threads holding the GIL, i.e. Python CPU;
`--nonblocking`: the worker is never paused). Each sample is charged to the first frame, from the
leaf up, whose file matches a category below, and reported as worker milliseconds per agent step.
"""

from __future__ import annotations

import asyncio
import shutil
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.harness import VARIANTS, Env, check_result, start_run, timed_run
from bench.progress import Progress

RATE = 250
CATEGORIES = (
    # (label, substrings of a frame's "function (file:line)"), first match from the leaf wins
    ("ledger (sqlite)", ("ratchet/stores/ledger.py", "sqlite3")),
    ("artifact store (fsync)", ("ratchet/stores/artifacts.py",)),
    ("claim-check codec", ("ratchet/payloads/claim_check.py", "ratchet/payloads/converter.py")),
    ("logging", ("logging/__init__.py", "ratchet/ops/logs.py")),
    ("metrics + redaction interceptors", ("ratchet/ops/metrics.py", "ratchet/ops/redaction.py")),
    ("model/tool activity code", ("activities/", "ratchet/models/", "ratchet/core/tools.py", "bench/plugin.py", "bench/floor.py")),
    ("Ratchet workflow code", ("workflows/",)),
    ("json", ("json/",)),
    ("pydantic", ("pydantic",)),
    ("sandbox imports (new run)", ("_create_workflow_instance", "importlib")),
    ("payload conversion", ("temporalio/converter.py", "temporalio/contrib/pydantic")),
    ("payload visitor (codec on)", ("temporalio/bridge/_visitor.py", "visit_payload")),
    ("SDK workflow runtime + sandbox", ("temporalio/worker/_workflow", "workflow_sandbox", "temporalio/workflow.py")),
    ("SDK activity runtime", ("temporalio/worker/_activity.py", "temporalio/activity.py")),
    ("SDK core bridge (protobuf)", ("temporalio/bridge", "google/protobuf")),
    ("event loop + threads", ("asyncio/", "selectors.py", "threading.py", "concurrent/")),
)


def py_spy() -> str | None:
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if beside.exists() else shutil.which("py-spy")


def categorize(frames: list[str]) -> str:
    for frame in reversed(frames):
        for label, needles in CATEGORIES:
            if any(n in frame for n in needles):
                return label
    return "other"


def parse_raw(path: Path) -> tuple[Counter, Counter, int]:
    """py-spy's raw (collapsed) output -> samples by category, by leaf function, total."""
    by_category: Counter = Counter()
    by_leaf: Counter = Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        frames, n = stack.split(";"), int(count)
        total += n
        by_category[categorize(frames)] += n
        by_leaf[frames[-1]] += n
    return by_category, by_leaf, total


async def profile_variant(env: Env, name: str, steps: int, runs: int, out: Path, agents: int = 1) -> dict[str, Any]:
    """py-spy on one worker while it does `runs` rounds of `agents` concurrent runs of `steps` steps."""
    variant = VARIANTS[name]
    label = name if agents == 1 else f"{name} x{agents}"
    raw = out / f"pyspy-{name}-x{agents}.folded"
    async with env.worker(variant) as worker:
        await timed_run(env, variant, steps, worker.queue)  # cold start outside the profile
        spy = subprocess.Popen(
            [py_spy(), "record", "--pid", str(worker.pid), "--format", "raw", "--output", str(raw),
             "--rate", str(RATE), "--gil", "--nonblocking"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        try:
            before = worker.stats()["cpu_s"]
            for _ in range(runs):
                handles = await asyncio.gather(*(start_run(env, variant, steps, worker.queue) for _ in range(agents)))
                for result in await asyncio.gather(*(h.result() for h in handles)):
                    check_result(variant, steps, result)
            cpu_ms = (worker.stats()["cpu_s"] - before) * 1000
        finally:
            spy.send_signal(signal.SIGINT)
            spy.wait(60)
    by_category, by_leaf, total = parse_raw(raw) if raw.exists() else (Counter(), Counter(), 0)
    done = steps * runs * agents
    per_step = 1000 / RATE / done
    return {
        "variant": label, "agents": agents, "samples": total, "python_ms_per_step": total * per_step,
        "worker_cpu_ms_per_step": cpu_ms / done, "stacks": raw.name,
        "by_category": {k: v * per_step for k, v in by_category.most_common()},
        "top_leaf": [(k, v * per_step) for k, v in by_leaf.most_common(12)],
    }


async def profile(env: Env, progress: Progress, steps: int, runs: int, levels: Sequence[int], work: Path,
                  keep: Path | None = None) -> list[dict[str, Any]]:
    """The floor and Ratchet under py-spy: `runs` runs one at a time, then `levels` runs at once
    (`steps` each). The collapsed stacks (flame graphs: speedscope.app or flamegraph.pl read them)
    are copied to `keep`."""
    if py_spy() is None:
        progress.note("py-spy not installed: no profile (pip install py-spy)")
        return []
    results = []
    for agents in (1, *levels):
        for name in ("floor", "ratchet"):
            what = f"{runs} runs of {steps} steps" if agents == 1 else f"{agents} runs of {steps} steps at once"
            progress.begin(f"profile: {name}, {what} under py-spy")
            results.append(await profile_variant(env, name, steps, runs if agents == 1 else 1, work, agents))
            progress.end(f"{results[-1]['python_ms_per_step']:.1f} ms Python CPU per step, worker CPU "
                         f"{results[-1]['worker_cpu_ms_per_step']:.1f} ms")
            if keep is not None and (work / results[-1]["stacks"]).exists():
                keep.mkdir(parents=True, exist_ok=True)
                shutil.copy(work / results[-1]["stacks"], keep / results[-1]["stacks"])
    return results
