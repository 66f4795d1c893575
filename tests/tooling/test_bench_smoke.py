"""The bench harness at its smallest (one cell per variant, N=2), so `make bench` cannot rot."""

from __future__ import annotations

import asyncio

import pytest

from bench.harness import VARIANTS, connect_env
from bench.record import write
from bench.steps import step_cell

pytestmark = pytest.mark.e2e  # slow: `make test-e2e`, not `make test`

async def test_bench_harness_measures_a_floor_and_a_ratchet_cell(dev_server, tmp_path):
    env = await connect_env(dev_server.address, dev_server.process.pid, tmp_path / "work")
    cells = await asyncio.gather(*(step_cell(env, VARIANTS[name], 2, warm_runs=1) for name in ("floor", "ratchet")))
    for cell in cells:
        assert cell["ms_per_step"] > 0 and cell["cold_s"] > 0 and cell["events_per_step"] > 0
        assert cell["wft_timeouts"] == 0
    ratchet = cells[1]
    assert ratchet["fields"], "payload field sizes of Ratchet's activities"
    results = {"meta": {
        "command": "test", "date": "-", "duration_s": 1.0, "cores": 2, "memory_gib": 1.0, "load_start": [0],
        "load_end": [0], "load_note": "-", "temporalio": "-", "server": "-", "python": "-",
        "variants": ["floor", "ratchet"], "component_steps": 2, "headline_agents": 100,
    }, "step_cost": list(cells)}
    figures = write(results, tmp_path / "out")
    assert figures["step_time_ratio"] > 0 and figures["history_bytes_ratio"] > 1
    report = (tmp_path / "out" / "latest.md").read_text()
    assert "step_time_ratio" in report and "## Findings" in report


async def test_bench_scaleout_cells_count_store_calls_on_both_store_pairs(dev_server, tmp_path):
    from bench.scaleout import LOCAL, REMOTE, remote_stores, scaleout_figures, variants

    env = await connect_env(dev_server.address, dev_server.process.pid, tmp_path / "work")
    with remote_stores(tmp_path / "stores") as remote_env:
        table = variants(remote_env)
        cells = await asyncio.gather(*(step_cell(env, table[name], 2, warm_runs=1) for name in (LOCAL, REMOTE)))
    for cell in cells:
        calls = cell["store_calls_per_step"]
        # a model call reads its entry (it does not claim its key), then completes it
        assert calls["ledger.get"] >= 1 and calls["ledger.complete"] >= 1 and calls["artifacts.put"] >= 1, calls
    figures = scaleout_figures({"cells": list(cells)})
    assert figures["scaleout_step_time_ratio"] > 0 and figures["scaleout_worker_cpu_ratio"] > 0
    assert figures["scaleout_ledger_calls_per_step"] >= 2


async def test_bench_sandbox_cells_time_run_command_steps_under_each_backend(dev_server, tmp_path):
    from bench.sandbox import NSJAIL, OFF, sandbox_figures, sandbox_pair

    env = await connect_env(dev_server.address, dev_server.process.pid, tmp_path / "work")
    cells = await sandbox_pair(env, steps=2, runs=1, rep=0)
    assert [c["variant"] for c in cells] == [NSJAIL, OFF]
    for cell in cells:
        assert cell["ms_per_step"] > cell["tool_ms"] > 10 and cell["cpu_ms_per_step"] > 0, cell  # sleep 0.01
    figures = sandbox_figures(cells)
    assert figures["sandbox_step_ratio"] > 0
    results = {"meta": {
        "command": "test", "date": "-", "duration_s": 1.0, "cores": 2, "memory_gib": 1.0, "load_start": [0],
        "load_end": [0], "load_note": "-", "temporalio": "-", "server": "-", "python": "-",
        "variants": [], "component_steps": 2, "headline_agents": 100,
    }, "sandbox": cells}
    assert write(results, tmp_path / "out")["sandbox_step_ratio"] == figures["sandbox_step_ratio"]
    assert "## Sandbox" in (tmp_path / "out" / "latest.md").read_text()


async def test_bench_workspace_cells_run_the_coders_file_tools_locally_on_one_and_two_hosts(dev_server, tmp_path):
    """read_file steps run as local activities where the workflow's worker holds the workspace,
    also with a second host's worker on the queue; write_file steps are activities on the host queue."""
    env = await connect_env(dev_server.address, dev_server.process.pid, tmp_path / "work")
    names = ("workspace", "workspace_write", "workspace_2hosts")
    cells = await asyncio.gather(*(step_cell(env, VARIANTS[name], 2, warm_runs=1) for name in names))
    for cell in cells:
        assert cell["ms_per_step"] > 0 and cell["wft_timeouts"] == 0, cell
    # `fields` names the payloads of scheduled activities ("tool in: arguments" for a tool activity)
    tool_activities = {cell["variant"]: any(k.startswith("tool in") for k in cell["fields"]) for cell in cells}
    assert tool_activities == {"workspace": False, "workspace_write": True, "workspace_2hosts": False}, tool_activities


async def test_bench_console_times_the_runs_page_and_a_run_page_running_and_closed(dev_server, tmp_path):
    from bench.console import console_cost, console_figures, console_rows
    from bench.progress import Progress

    env = await connect_env(dev_server.address, dev_server.process.pid, tmp_path / "work")
    section = await console_cost(env, Progress(4), runs=5, steps=3, samples=2)
    figures = console_figures(section)
    for page in ("runs", "run", "closed_run"):
        assert 0 < figures[f"console_{page}_ttfb_p50_ms"] <= figures[f"console_{page}_last_p50_ms"], figures
    assert figures["console_closed_run_first_ms"] > 0
    assert [row[0] for row in console_rows(section)[1]] == ["runs", "run", "closed_run"]
