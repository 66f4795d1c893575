"""PNG plots of a bench run (matplotlib, no display needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.steps import cell_medians


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_all(results: dict[str, Any], out: Path) -> list[Path]:
    """Write every plot the results allow; returns the files written (none without matplotlib)."""
    try:
        plt = _pyplot()
    except ImportError:
        return []
    written = []
    for name, draw in (("step_cost", _step_cost), ("history", _history), ("scale", _scale), ("long_run", _long_run)):
        fig = draw(plt, results)
        if fig is None:
            continue
        path = out / f"{name}.png"
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written


def _by_variant(cells: list[dict[str, Any]], key: str) -> dict[str, tuple[list[int], list[float], list[float], list[float]]]:
    med = cell_medians(cells)
    series: dict[str, tuple[list[int], list[float], list[float], list[float]]] = {}
    for (variant, n), row in sorted(med.items(), key=lambda kv: kv[0][1]):
        xs, ys, lo, hi = series.setdefault(variant, ([], [], [], []))
        xs.append(n)
        ys.append(row[key])
        lo.append(row.get(f"{key}_min", row[key]))
        hi.append(row.get(f"{key}_max", row[key]))
    return series


def _step_cost(plt, results: dict[str, Any]):
    cells = results.get("step_cost") or []
    if not cells:
        return None
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for variant, (xs, ys, lo, hi) in _by_variant(cells, "ms_per_step").items():
        err = [[y - a for y, a in zip(ys, lo)], [b - y for y, b in zip(ys, hi)]]
        left.errorbar(xs, ys, yerr=err, marker="o", capsize=3, label=variant)
    left.set(xlabel="steps per run (N)", ylabel="ms per step (median, min-max)", title="Step time")
    for variant, (xs, ys, _, _) in _by_variant(cells, "cpu_ms_per_step").items():
        right.plot(xs, ys, marker="o", label=f"{variant} worker")
    for variant, (xs, ys, _, _) in _by_variant(cells, "server_cpu_ms_per_step").items():
        right.plot(xs, ys, marker="x", linestyle="--", label=f"{variant} server")
    right.set(xlabel="steps per run (N)", ylabel="CPU ms per step", title="Worker and server CPU")
    left.legend()
    right.legend(fontsize=7)
    return fig


def _history(plt, results: dict[str, Any]):
    cells = results.get("step_cost") or []
    if not cells:
        return None
    fig, ax = plt.subplots(figsize=(6, 4))
    for variant, (xs, ys, _, _) in _by_variant(cells, "bytes_per_step").items():
        ax.plot(xs, ys, marker="o", label=variant)
    ax.set(xlabel="steps per run (N)", ylabel="history bytes per step", title="History cost", ylim=(0, None))
    ax.legend()
    return fig


def _scale(plt, results: dict[str, Any]):
    cells = sorted(results.get("sweep") or [], key=lambda c: c["agents"])
    if not cells:
        return None
    fig, ax = plt.subplots(figsize=(6, 4))
    xs = [c["agents"] for c in cells]
    ax.plot(xs, [c["steps_per_s"] for c in cells], marker="o", color="tab:blue", label="steps/s")
    ax.set(xlabel="concurrent agents on one worker", ylabel="steps per second", title="Scale (Ratchet)", ylim=(0, None))
    twin = ax.twinx()
    twin.plot(xs, [c["p50_step_ms"] for c in cells], marker="x", color="tab:orange", label="p50 step ms")
    twin.plot(xs, [c["p99_step_ms"] for c in cells], marker="x", color="tab:red", label="p99 step ms")
    twin.set(ylabel="step latency ms", ylim=(0, None))
    fig.legend(loc="lower right", fontsize=8, bbox_to_anchor=(0.85, 0.15))
    return fig


def _long_run(plt, results: dict[str, Any]):
    long = (results.get("long") or {}).get("long")
    if not long:
        return None
    fig, (a, b, c) = plt.subplots(1, 3, figsize=(13, 4))
    samples = long["rss_samples"]
    a.plot([t for t, _ in samples], [m for _, m in samples])
    a.set(xlabel="seconds", ylabel="worker RSS MiB", title="Long run: worker memory", ylim=(0, None))
    runs = list(range(1, len(long["per_run_bytes"]) + 1))
    b.plot(runs, [x / 1024 for x in long["per_run_bytes"]], marker=".", label="history KiB")
    b.plot(runs, [x / 1024 for x in long["per_run_input"]], marker=".", label="input KiB (before claim check)")
    b.set(xlabel="run of the continue-as-new chain", ylabel="KiB", title="Long run: per-run history", ylim=(0, None))
    b.legend(fontsize=8)
    c.plot(range(1, len(long["per_run_step_ms"]) + 1), long["per_run_step_ms"], marker=".")
    c.set(xlabel="run of the chain", ylabel="median ms per step", title="Long run: step time", ylim=(0, None))
    return fig
