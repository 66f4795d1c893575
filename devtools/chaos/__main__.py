"""`python -m devtools.chaos --runs 50`: see devtools/chaos/runner.py; `--hosts 2`: two hosts, one
SIGKILLed for good, store outages (devtools/chaos/hosts.py); `--sessions 20 --turns 10`: sessions
asked turn after turn under the same faults (devtools/chaos/sessions.py); `--deploys --sessions 10 --runs 10`:
sessions and one-shot runs while the current build goes v1 -> v2 -> v1 (devtools/chaos/deploys.py).
Exits 1 if any figure is off."""

from __future__ import annotations

import argparse
import asyncio
import logging
from pathlib import Path

from devtools.chaos.deploys import DeploysOptions, run_deploys
from devtools.chaos.hosts import STORES, HostsOptions, run_hosts
from devtools.chaos.runner import Options, audit_problems, run_chaos
from devtools.chaos.sessions import SessionsOptions, run_sessions
from ratchet.ops.process import exit_now


def parse(argv: list[str] | None = None) -> Options | HostsOptions | SessionsOptions | DeploysOptions:
    p = argparse.ArgumentParser(prog="python -m devtools.chaos", description="Agent runs under SIGKILLs, a server "
                                "restart and model faults, then an audit of the outside store.")
    p.add_argument("--runs", type=int, default=50)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--model-share", type=float, default=0.3, help="share of runs on the faulty openai endpoint")
    p.add_argument("--model-faults", action="store_true", help="every run on the faulty endpoint (--model-share 1)")
    p.add_argument("--fault-rate", type=float, default=0.3, help="share of model requests that fail")
    p.add_argument("--kill-every", type=float, nargs=2, default=(4.0, 15.0), metavar=("MIN_S", "MAX_S"))
    p.add_argument("--max-kills", type=int, default=None, help="stop killing after this many kills")
    p.add_argument("--task-timeout", type=float, default=None, help="workflow task timeout of the runs, seconds")
    p.add_argument("--no-kills", action="store_true", help="never kill the worker")
    p.add_argument("--no-server-restart", action="store_true")
    p.add_argument("--spread", type=float, default=None, help="seconds over which runs start (default: runs)")
    p.add_argument("--deadline", type=float, default=900.0, help="seconds before an open run counts as lost")
    p.add_argument("--agent", default="chaos", choices=["chaos", "chaos_quick"], help="chaos_quick: no checkpoints")
    p.add_argument("--dir", type=Path, default=None, help="state directory (default .devtools/chaos/<time>)")
    hosts = p.add_argument_group("two hosts (--hosts 2; the options above apply: --runs, --seed, --spread, "
                                 "--task-timeout, --deadline, --dir)")
    hosts.add_argument("--hosts", type=int, default=1, choices=[1, 2],
                       help="2: two worker processes as two hosts on Postgres, S3 and the dev server; one is "
                       "SIGKILLed for good")
    hosts.add_argument("--outages", default=",".join(STORES),
                       help="stores stopped for --outage-s and started again, comma-separated: postgres, s3 (or none)")
    hosts.add_argument("--outage-s", type=float, default=10.0)
    hosts.add_argument("--kill-at", type=float, default=None, help="seconds after the first start (default: 30%% of the spread)")
    sessions = p.add_argument_group("sessions (--sessions N; --seed, --kill-every, --no-server-restart, "
                                    "--deadline, --dir apply)")
    sessions.add_argument("--sessions", type=int, default=0, help="N sessions asked --turns turns each, instead of runs")
    sessions.add_argument("--turns", type=int, default=10)
    deploys = p.add_argument_group("deploys (--deploys; --sessions, --runs, --seed, --kill-every, --max-kills, "
                                   "--no-server-restart, --deadline, --dir apply)")
    deploys.add_argument("--deploys", action="store_true",
                         help="sessions and one-shot runs while the current build goes v1 -> v2 -> v1 (v1: a "
                         "pinned earlier commit, v2: the working tree), each version's worker SIGKILLed")
    deploys.add_argument("--v1", default=None, help="the commit that is v1 (default: devtools.versions.V1)")
    a = p.parse_args(argv)
    if a.deploys:
        return DeploysOptions(
            sessions=a.sessions or 10, runs=a.runs, seed=a.seed, kill_every=tuple(a.kill_every),
            max_kills=a.max_kills, restart_server=not a.no_server_restart, deadline_s=a.deadline, base=a.dir,
            **({"v1": a.v1} if a.v1 else {}),
        )
    if a.sessions:
        return SessionsOptions(
            sessions=a.sessions, turns=a.turns, seed=a.seed, kill_every=tuple(a.kill_every), max_kills=a.max_kills,
            restart_server=not a.no_server_restart, deadline_s=a.deadline, base=a.dir,
        )
    if a.hosts == 2:
        outages = tuple(o for o in a.outages.split(",") if o and o != "none")
        if any(o not in STORES for o in outages):
            p.error(f"--outages: {a.outages!r}: expected a comma-separated list of {', '.join(STORES)} or none")
        return HostsOptions(
            runs=a.runs, seed=a.seed, spread_s=a.spread, kill_at_s=a.kill_at, outages=outages, outage_s=a.outage_s,
            task_timeout_s=a.task_timeout or 5.0, deadline_s=a.deadline, base=a.dir,
        )
    return Options(
        runs=a.runs, seed=a.seed, model_share=1.0 if a.model_faults else a.model_share, fault_rate=a.fault_rate,
        kill_every=tuple(a.kill_every), kills=not a.no_kills, restart_server=not a.no_server_restart,
        spread_s=a.spread, max_kills=a.max_kills, task_timeout_s=a.task_timeout, deadline_s=a.deadline,
        base=a.dir, agent=a.agent,
    )


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.ERROR)
    opts = parse(argv)
    if isinstance(opts, SessionsOptions):
        return _sessions(opts)
    if isinstance(opts, DeploysOptions):
        return _deploys(opts)
    try:
        session = asyncio.run(run_hosts(opts) if isinstance(opts, HostsOptions) else run_chaos(opts))
    except Exception as exc:  # the harness itself failed: say so, never print a figure
        logging.getLogger("devtools.chaos").exception("chaos run could not complete: %s", exc)
        return 2
    for line in audit_problems(session.audits):
        print(line)
    print(f"report: {session.base / 'report.json'}")
    if isinstance(opts, HostsOptions):
        print(session.figures.details())
    print(session.figures.line(), flush=True)
    return 0 if session.figures.ok else 1


def _sessions(opts: SessionsOptions) -> int:
    try:
        done = asyncio.run(run_sessions(opts))
    except Exception as exc:  # the harness itself failed: say so, never print a figure
        logging.getLogger("devtools.chaos").exception("chaos sessions could not complete: %s", exc)
        return 2
    for line in done.figures.problems:
        print(line)
    print(f"kills={done.figures.kills} dir={done.base}")
    print(done.figures.line(), flush=True)
    return 0 if done.figures.ok else 1


def _deploys(opts: DeploysOptions) -> int:
    try:
        done = asyncio.run(run_deploys(opts))
    except Exception as exc:  # the harness itself failed: say so, never print a figure
        logging.getLogger("devtools.chaos").exception("chaos deploys could not complete: %s", exc)
        return 2
    for line in done.figures.problems:
        print(line)
    print(f"kills={done.figures.kills} v1={done.figures.builds[0]} v2={done.figures.builds[1]} dir={done.base}")
    print(done.figures.line(), flush=True)
    return 0 if done.figures.ok else 1


if __name__ == "__main__":
    exit_now(main())
