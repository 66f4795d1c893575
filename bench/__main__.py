"""`python -m bench [--quick] [--out DIR] [--only SECTION ...]`: run the benchmarks, print every figure
as `name=value`, write DIR/latest.md, latest.json and PNG plots (default DIR: bench/results).

Sections, in order: steps (step and history cost), components, scaleout (the Postgres ledger and S3
artifacts against SQLite and a directory; starts both servers), sandbox (a run_command step in the
nsjail sandbox against RATCHET_SANDBOX=off), sessions (a session's turn against a raw-SDK update, idle
sessions on one worker, a long session's history per run; bench/sessions.py), console (`ratchet console`'s
runs page with 1,000 runs in visibility and a 200-step run's page, running and closed: TTFB and last request;
bench/console.py), mcp (a tool call on a lean stdio MCP server and on the SDK's
`MCPServer` against the same `@tool`), stream (model calls streamed against not, same worker; the
delay from a delta's send to a subscriber and to an SSE client, 20 runs at once), throughput, sweep, cached,
long (long run + replay), profile (py-spy), micro (model.call in-process), providers (the anthropic provider
against the openai one, prompt caching on against off, in-process against the local strict servers). A dev
server of its own is
started in a temporary directory and stopped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import temporalio

from bench import console, longrun, mcp_calls, micro, profiling, providers, sandbox, scale, scaleout, sessions, steps, streaming
from bench.harness import SERVER_CONFIG, REPO, connect_env, machine_load
from bench.progress import Progress
from bench.report import compute_figures, fmt, markdown

SECTIONS = ("steps", "components", "scaleout", "sandbox", "mcp", "stream", "sessions", "console", "throughput", "sweep", "cached", "long",
            "profile", "micro", "providers")
FULL = dict(
    variants=["floor", "ratchet", "regular", "workspace", "workspace_write", "workspace_2hosts"], steps=[5, 20, 50],
    reps=3, warm_runs=2,
    component_variants=["ratchet", "ledger", "verify", "no_sa"],
    component_steps=20, component_reps=2, scaleout_steps=20, scaleout_reps=3, scaleout_concurrent=(10, 10),
    sandbox=(20, 3, 5), mcp=(60, 3), stream=(20, 3, 20), sessions=(50, 10_000, 1000), console=(1000, 200, 50),
    throughput=(20, 10, 2), levels=[25, 50, 100, 200], level_steps=10,
    headline_agents=100, headline_steps=20, cached=1000, long_steps=5000, long_budget_s=900, replay_steps=1000,
    profile=(25, 4), providers=(20, 3),
)
QUICK = dict(
    FULL, steps=[5, 20], reps=1, warm_runs=1, component_variants=["ratchet", "ledger", "verify"],
    component_steps=10, component_reps=1, scaleout_steps=10, scaleout_reps=1, scaleout_concurrent=(10, 5),
    sandbox=(10, 2, 3), mcp=(30, 1), stream=(10, 1, 20), sessions=(20, 200, 100), console=(200, 50, 20),
    throughput=(20, 10, 1), levels=[25, 100], level_steps=5,
    headline_steps=5, cached=200, long_steps=400, long_budget_s=180, replay_steps=200, profile=(20, 2), providers=(20, 1),
)


def planned_units(cfg: dict[str, Any], only: set[str]) -> int:
    units = {
        "steps": len(cfg["variants"]) * len(cfg["steps"]) * cfg["reps"],
        "components": len(cfg["component_variants"]) * cfg["component_reps"],
        "scaleout": 2 * (len(scaleout.WORKLOADS) + 1) * cfg["scaleout_reps"], "sandbox": cfg["sandbox"][1], "mcp": cfg["mcp"][1] + 1, "stream": 2 * cfg["stream"][1] + 1, "sessions": 3, "console": 4,
        "throughput": len(scale.THROUGHPUT_VARIANTS) * cfg["throughput"][2], "sweep": len(cfg["levels"]), "cached": 1, "long": 3,
        "profile": 2, "micro": 1, "providers": 1,
    }
    return sum(n for section, n in units.items() if section in only)


def server_version() -> str:
    from devtools.devserver import temporal_binary

    done = subprocess.run([temporal_binary(), "--version"], capture_output=True, text=True, timeout=30)
    return done.stdout.strip()


def meta(cfg: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    return {
        "command": "python -m bench " + " ".join(sys.argv[1:]) if sys.argv[1:] else "make bench", "quick": args.quick,
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "cores": os.cpu_count(), "memory_gib": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30,
        "load_start": machine_load(), "temporalio": temporalio.__version__, "server": server_version(),
        "python": platform.python_version(), "variants": cfg["variants"], "component_steps": cfg["component_steps"],
        "headline_agents": cfg["headline_agents"], "load_note": args.load_note,
    }


async def run(cfg: dict[str, Any], args: argparse.Namespace, only: set[str]) -> dict[str, Any]:
    from devtools.devserver import DevServer

    results: dict[str, Any] = {"meta": meta(cfg, args), "config": cfg}
    progress = Progress(planned_units(cfg, only))
    began = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="ratchet-bench-"))
    server = DevServer(db_file=work / "temporal.db", log_file=work / "server.log", dynamic_config=SERVER_CONFIG)
    progress.note(f"dev server starting in {work}; {planned_units(cfg, only)} measurements planned")
    with server:
        env = await connect_env(server.address, server.process.pid if server.process else None, work)
        if "steps" in only:
            results["step_cost"] = await steps.step_cost(env, progress, cfg["variants"], cfg["steps"], cfg["reps"], cfg["warm_runs"])
        if "components" in only:
            results["components"] = await steps.step_cost(
                env, progress, cfg["component_variants"], [cfg["component_steps"]], cfg["component_reps"],
                cfg["warm_runs"], section="components")
        if "scaleout" in only:
            results["scaleout"] = await scaleout.scaleout(env, progress, cfg["scaleout_steps"], cfg["scaleout_reps"],
                                                          cfg["warm_runs"], cfg["scaleout_concurrent"])
        if "sandbox" in only:
            results["sandbox"] = await sandbox.sandbox_cost(env, progress, *cfg["sandbox"])
        if "mcp" in only:
            results["mcp"] = await mcp_calls.mcp_cost(env, progress, *cfg["mcp"])
        if "stream" in only:
            results["stream"] = await streaming.stream_cost(env, progress, *cfg["stream"])
        if "sessions" in only:
            results["sessions"] = await sessions.session_cost(env, progress, *cfg["sessions"])
        if "console" in only:
            results["console"] = await console.console_cost(env, progress, *cfg["console"])
        if "throughput" in only:
            results["throughput"] = await scale.throughput_pair(env, progress, *cfg["throughput"])
        if "sweep" in only:
            results["sweep"] = await scale.sweep(env, progress, cfg["levels"], cfg["level_steps"],
                                                 cfg["headline_agents"], cfg["headline_steps"])
        if "cached" in only:
            results["cached"] = await scale.cached_runs(env, progress, cfg["cached"])
        if "long" in only:
            results["long"] = await longrun.long_and_replay(env, progress, cfg["long_steps"], cfg["replay_steps"],
                                                            cfg["long_budget_s"])
        if "profile" in only:
            results["profile"] = await profiling.profile(env, progress, *cfg["profile"], work)
    if "micro" in only:
        progress.begin("micro: model.call in-process by transcript length")
        results["micro"] = await micro.model_call_costs()
        progress.end("done")
    if "providers" in only:
        progress.begin("providers: anthropic against openai, caching on against off")
        results["providers"] = await providers.provider_costs(*cfg["providers"])
        progress.end("done")
    results["meta"]["load_end"] = machine_load()
    results["meta"]["duration_s"] = time.monotonic() - began
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return results


def merge(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """`old` with the sections `new` measured replaced; the report names what was re-run when."""
    merged = {**old, **{k: v for k, v in new.items() if k not in ("meta", "config", "figures")}}
    sections = sorted(k for k in new if k not in ("meta", "config", "figures"))
    merged["meta"] = dict(old["meta"])
    merged["meta"].setdefault("updates", []).append(
        f"{', '.join(sections)} re-measured by `{new['meta']['command']}` on {new['meta']['date']} "
        f"({new['meta']['duration_s'] / 60:.1f} min; load {new['meta']['load_start']} -> {new['meta']['load_end']}; "
        f"long-run budget {new['config']['long_budget_s']:.0f} s)")
    merged["config"] = {**old.get("config", {}), **{k: v for k, v in new["config"].items() if k.startswith(("long", "replay", "cached"))}}
    return merged


def write(results: dict[str, Any], out: Path) -> dict[str, float]:
    from bench.plots import plot_all

    out.mkdir(parents=True, exist_ok=True)
    figures = compute_figures(results)
    results["figures"] = figures
    plots = [p.name for p in plot_all(results, out)]
    (out / "latest.md").write_text(markdown(results, figures, plots))
    (out / "latest.json").write_text(json.dumps(results, indent=1, default=str))
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, fewer repetitions (a few minutes)")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results")
    parser.add_argument("--only", nargs="+", choices=SECTIONS, help="run only these sections")
    parser.add_argument("--long-budget-s", type=float, help="time budget of the long run (default 900 s, quick 180 s)")
    parser.add_argument("--merge", action="store_true",
                        help="with --only: replace just those sections in OUT/latest.json and re-render the report")
    parser.add_argument("--from-json", type=Path, help="re-render the report and plots from a saved latest.json")
    parser.add_argument("--keep", action="store_true", help="keep the work dir (server db, worker logs, py-spy raw stacks)")
    parser.add_argument("--load-note", default="other agents' test suites share this machine",
                        help="what else ran on the machine (goes into the report)")
    args = parser.parse_args(argv)
    cfg = dict(QUICK if args.quick else FULL)
    if args.long_budget_s is not None:
        cfg["long_budget_s"] = args.long_budget_s
    if args.from_json:
        results = json.loads(args.from_json.read_text())
    else:
        results = asyncio.run(run(cfg, args, set(args.only or SECTIONS)))
        if args.merge:
            results = merge(json.loads((args.out / "latest.json").read_text()), results)
    figures = write(results, args.out)
    print(f"cores={results['meta']['cores']}")
    print(f"temporalio={results['meta']['temporalio']}")
    print(f"dev_server={results['meta']['server'].splitlines()[0] if results['meta']['server'] else '?'}")
    for name, value in figures.items():
        print(f"{name}={fmt(value)}")
    print(f"report: {args.out / 'latest.md'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    status = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)  # temporalio can abort at interpreter exit (SDK issue #300)
