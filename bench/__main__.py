"""`python -m bench [--quick | --smoke] [--out DIR] [--only SECTION ...]`: run the benchmarks, print every
figure as `name=value`, write DIR/latest.md, latest.json and PNG plots (default DIR: bench/results).

The results are written as each section finishes (bench/record.py): a section that raises is
recorded as failed with its traceback, the others still run and count, and the exit status is 1
when any failed. Each section records how much CPU other programs took meanwhile (bench/quiet.py);
its figures are marked not comparable when the machine was busy.

Sections, in order: steps (step and history cost), components (the ledger, verification, search
attributes and five guardrails against plain Ratchet), scaleout (the Postgres ledger and S3
artifacts against SQLite and a directory; starts both servers), sandbox (a run_command step in the
nsjail sandbox against RATCHET_SANDBOX=off), sessions (a session's turn against a raw-SDK update, idle
sessions on one worker, a long session's history per run; bench/sessions.py), console (`ratchet console`'s
runs page with 1,000 runs in visibility and a 200-step run's page, running and closed: TTFB and last request;
bench/console.py), hooks (a signed webhook's request to its run's first workflow task; bench/hooks.py), approvals (an
approval's round trip signed against unsigned; bench/approvals.py),
shadow (a recorded shadow's step against its original's, 100 recorded runs' shadows to their report; bench/shadow.py),
billing (worker CPU per model call with the billing ledger against without; bench/billing.py),
guard (a broken build's ramp: its first failed run's close -> the deploy guard's rollback;
bench/guard.py), mcp (a tool call on a lean stdio MCP server and on the SDK's
`MCPServer` against the same `@tool`), stream (model calls streamed against not, same worker; the
delay from a delta's send to a subscriber and to an SSE client, 20 runs at once), throughput, sweep, cached,
long (long run + replay), profile (py-spy), micro (model.call in-process), providers (the anthropic provider
against the openai one, prompt caching on against off, in-process against the local strict servers), policy
(the approval policy check per tool call on a profile of 50 rules, in-process; bench/policy.py); their
table is bench/sections.py. A dev server of its own is started in a temporary directory and stopped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
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

from bench import record
from bench.harness import SERVER_CONFIG, REPO, connect_env, machine_load
from bench.micro import LENGTHS
from bench.progress import Progress
from bench.report import fmt
from bench.sections import BY_NAME, NAMES, Context, Record, run_sections

FULL = dict(
    variants=["floor", "ratchet", "regular", "workspace", "workspace_write", "workspace_2hosts"], steps=[5, 20, 50],
    reps=3, warm_runs=2,
    component_variants=["ratchet", "ledger", "verify", "no_sa", "guarded"],
    component_steps=20, component_reps=2, scaleout_steps=20, scaleout_reps=3, scaleout_concurrent=(10, 10),
    sandbox=(20, 3, 5), mcp=(60, 3), stream=(20, 3, 20), sessions=(200, 10_000, 1000), console=(1000, 200, 50), hooks=200, approvals=100, shadow=(10, 3, 100),
    guard=(5.0, 3, 4), fairness=(200, 5, 5), billing=(20, 5),
    throughput=[(20, 10, 9), (100, 20, 3)], levels=[25, 50, 100, 200], level_steps=10,
    headline_agents=100, headline_steps=20, cached=1000, long_steps=5000, long_budget_s=900, replay_steps=1000,
    profile=(25, 4, (20, 100)), micro=(LENGTHS, 7), providers=(20, 3), policy=20_000,
)
QUICK = dict(
    FULL, steps=[5, 20], reps=1, warm_runs=1, component_variants=["ratchet", "ledger", "verify", "guarded"],
    component_steps=10, component_reps=1, scaleout_steps=10, scaleout_reps=1, scaleout_concurrent=(10, 5),
    sandbox=(10, 2, 3), mcp=(30, 1), stream=(10, 1, 20), sessions=(20, 200, 100), console=(200, 50, 20), hooks=50, approvals=30, shadow=(10, 2, 100), guard=(5.0, 2, 4), billing=(10, 3),
    fairness=(100, 5, 5), throughput=[(20, 10, 1)], levels=[25, 100], level_steps=5,
    headline_steps=5, cached=200, long_steps=400, long_budget_s=180, replay_steps=200, profile=(20, 2, (20,)), providers=(20, 1),
)
SMOKE = dict(
    QUICK, variants=["floor", "ratchet", "workspace"], steps=[2], warm_runs=1, component_variants=["ratchet"],
    component_steps=2, scaleout_steps=2, scaleout_concurrent=(2, 2), sandbox=(2, 1, 1), mcp=(4, 1), stream=(2, 1, 2, 1),
    sessions=(3, 3, 3), console=(3, 3, 2), hooks=2, approvals=2, shadow=(2, 1, 3), guard=(1.0, 1, 2), billing=(2, 1), throughput=[(2, 2, 1)], levels=[2], level_steps=2, headline_agents=2,
    headline_steps=2, cached=3, long_steps=30, long_budget_s=60, replay_steps=20, profile=(2, 1, (2,)), micro=((2,), 1),
    providers=(2, 1), policy=100, fairness=(3, 2, 0),
)
"""Every section at its smallest, so a test can run them all (tests/tooling/test_bench_sections.py)."""


def server_version() -> str:
    from devtools.devserver import temporal_binary

    done = subprocess.run([temporal_binary(), "--version"], capture_output=True, text=True, timeout=30)
    return done.stdout.strip()


def meta(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "command": "python -m bench " + " ".join(sys.argv[1:]) if sys.argv[1:] else "make bench", "size": args.size,
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "cores": os.cpu_count(), "memory_gib": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30,
        "load_start": machine_load(), "temporalio": temporalio.__version__, "server": server_version(),
        "python": platform.python_version(), "load_note": args.load_note, "finished": False,
    }


async def run(cfg: dict[str, Any], args: argparse.Namespace, names: list[str]) -> dict[str, Any]:
    """Run the sections `names`, writing the results file after each one; the final document."""
    from devtools.devserver import DevServer

    chosen = [BY_NAME[n] for n in names]
    doc = record.start(record.load(args.out), meta(args), cfg)
    progress = Progress(sum(s.units(cfg) for s in chosen))
    began = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="ratchet-bench-"))
    ctx = Context(progress, cfg, work, args.out, probe_s=args.probe_s)

    def done(rec: Record) -> None:
        record.add(doc, rec)
        doc["meta"]["duration_s"] = time.monotonic() - began
        record.write(doc, args.out)

    served, local = [s for s in chosen if s.server], [s for s in chosen if not s.server]
    if served:
        server = DevServer(db_file=work / "temporal.db", log_file=work / "server.log", dynamic_config=SERVER_CONFIG)
        progress.note(f"dev server starting in {work}; {progress.total} measurements planned")
        with server:
            ctx.env = await connect_env(server.address, server.process.pid if server.process else None, work)
            await run_sections(ctx, served, done)
    await run_sections(ctx, local, done)
    doc["meta"].update(load_end=machine_load(), duration_s=time.monotonic() - began, finished=True)
    record.write(doc, args.out)
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return doc


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0], allow_abbrev=False)
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", dest="size", action="store_const", const="quick",
                      help="smaller sizes, fewer repetitions (a few minutes)")
    size.add_argument("--smoke", dest="size", action="store_const", const="smoke",
                      help="every section at its smallest: does it still run? (figures mean nothing)")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results")
    parser.add_argument("--only", nargs="+", choices=NAMES, help="run only these sections (the others keep their results)")
    parser.add_argument("--long-budget-s", type=float, help="time budget of the long run (default 900 s, quick 180 s)")
    parser.add_argument("--from-json", action="store_true", help="re-render OUT/latest.md and the plots from OUT/latest.json")
    parser.add_argument("--keep", action="store_true", help="keep the work dir (server db, worker logs, py-spy raw stacks)")
    parser.add_argument("--probe-s", type=float, default=1.0,
                        help="seconds of other programs' CPU measured before each section (0: none)")
    parser.add_argument("--load-note", default="", help="what else ran on the machine (goes into the report)")
    parser.set_defaults(size="full")
    args = parser.parse_args(argv)
    cfg = dict({"full": FULL, "quick": QUICK, "smoke": SMOKE}[args.size])
    if args.long_budget_s is not None:
        cfg["long_budget_s"] = args.long_budget_s
    names = list(args.only or NAMES)
    if args.from_json:
        doc = record.load(args.out)
        figures = record.write(doc, args.out)
    else:
        doc = asyncio.run(run(cfg, args, names))
        figures = doc["figures"]
    print(f"cores={doc['meta']['cores']}")
    print(f"temporalio={doc['meta']['temporalio']}")
    print(f"dev_server={doc['meta']['server'].splitlines()[0] if doc['meta']['server'] else '?'}")
    for name, value in figures.items():
        print(f"{name}={fmt(value)}{' (not comparable)' if name in doc.get('not_comparable', []) else ''}")
    print(f"report: {args.out / 'latest.md'}", file=sys.stderr)
    failed = [] if args.from_json else record.failed(doc, names)
    if failed:
        print(f"FAILED sections: {', '.join(failed)} (tracebacks in {args.out / 'latest.md'})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    status = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)  # temporalio can abort at interpreter exit (SDK issue #300)
