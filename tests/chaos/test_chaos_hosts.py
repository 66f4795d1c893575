"""Two hosts in CI (`make chaos` runs the same with 20 runs and both outages): two worker processes
with their own RATCHET_HOST_ID and workspace roots, sharing only Postgres (ledger, tracker), the S3
server (artifacts) and the dev server; the host holding the most open runs is SIGKILLed for good,
then Postgres is stopped for 10 s and started again. Every run completes, fails over if it has to,
and the audit of the shared tracker and the final workspaces finds nothing missing or doubled."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from devtools.chaos.hosts import HostsOptions, run_hosts
from devtools.chaos.runner import audit_problems

pytestmark = pytest.mark.e2e  # slow: `make test-e2e`, not `make test`

async def test_two_hosts_one_killed_for_good_and_a_postgres_outage_lose_nothing(tmp_path: Path):
    opts = HostsOptions(runs=5, seed=3, spread_s=4.0, outages=("postgres",), outage_s=10.0, deadline_s=150.0,
                        base=tmp_path)
    session = await run_hosts(opts, log=lambda line: None)
    figures = session.figures
    report = figures.line() + "\n" + figures.details() + "\n" + "\n".join(audit_problems(session.audits))
    assert figures.ok, report
    assert re.fullmatch(
        r"hosts=2 runs=5 completed=5 lost=0 duplicate_effects=0 missing_effects=0 failovers=[1-9]\d*", figures.line()
    ), report
    assert figures.open_runs_on_killed_host >= 1, report
    [outage] = figures.outages
    assert outage.store == "postgres" and outage.down_s >= 10.0, report
    killed, alive = (tmp_path / figures.killed_host), next(p for p in tmp_path.glob("host-*") if p.name != figures.killed_host)
    assert killed.is_dir() and alive.is_dir() and not (tmp_path / "workspaces").exists(), "no shared workspace root"
