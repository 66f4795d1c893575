"""`make bench` cannot lose its results: every section at its smallest size, a failing section
recorded with its traceback while the others still count, and the machine's other work measured."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from bench import quiet, sections
from bench.__main__ import main
from bench.harness import REPO
from bench.sections import Section

SMOKE_GROUPS = (
    ("steps", "components", "scaleout", "sandbox", "hooks", "approvals"),
    ("mcp", "stream", "sessions", "console", "shadow"),
    ("billing", "guard", "fairness"),
    ("throughput", "sweep", "cached", "long", "profile", "micro", "providers", "policy"),
)
"""Every section, in groups of at most about 40 s that `make test`'s workers take in parallel (each
group in the order `make bench` runs them)."""


def test_the_smoke_groups_hold_every_section_once():
    assert sorted(n for group in SMOKE_GROUPS for n in group) == sorted(sections.NAMES)


@pytest.mark.parametrize("group", SMOKE_GROUPS, ids=lambda g: g[0])
def test_every_section_runs_at_its_smallest_size_and_is_written(tmp_path, group):
    """The whole bench, each section at its smallest: a changed signature fails here, not 40 minutes
    into `make bench`."""
    out = tmp_path / "results"
    done = subprocess.run(
        [sys.executable, "-m", "bench", "--smoke", "--only", *group, "--out", str(out), "--probe-s", "0"],
        cwd=REPO, capture_output=True, text=True, timeout=900,
    )
    assert (out / "latest.json").exists(), f"exit {done.returncode}, nothing written: {done.stderr[-3000:]}"
    doc = json.loads((out / "latest.json").read_text())
    failed = {n: s["traceback"] for n, s in doc["sections"].items() if s["status"] != "ok"}
    assert not failed and done.returncode == 0, (failed, done.stderr[-3000:])
    assert list(doc["sections"]) == list(group)
    for name in group:
        assert sections.BY_NAME[name].results_key in doc, name
    figures = doc["figures"]
    assert "throughput" not in group or figures["throughput_ratio"] > 0 and figures["side_by_side_worker_cpu_ratio"] > 0
    assert "steps" not in group or figures["step_time_ratio"] > 0
    assert "long" not in group or figures["replay_ratio"] > 0 and figures["replay_ratio_floor_local"] > 0
    assert "## Sections" in (out / "latest.md").read_text()


def test_a_failing_section_is_recorded_with_its_traceback_and_the_others_still_count(tmp_path, monkeypatch):
    out = tmp_path / "results"
    seen_before_failure = {}

    async def breaks(ctx):
        # the section before this one is already in the file: a crash from here on loses nothing
        seen_before_failure.update(json.loads((out / "latest.json").read_text())["sections"])
        raise TypeError("builtin_providers() takes 1 positional argument but 2 were given")

    monkeypatch.setitem(sections.BY_NAME, "micro", Section("micro", breaks, lambda cfg: 1, server=False))
    status = main(["--smoke", "--only", "providers", "micro", "--out", str(out), "--probe-s", "0"])
    assert status == 1
    assert seen_before_failure["providers"]["status"] == "ok"
    doc = json.loads((out / "latest.json").read_text())
    assert doc["sections"]["providers"]["status"] == "ok" and doc["providers"]
    micro = doc["sections"]["micro"]
    assert micro["status"] == "failed" and "TypeError: builtin_providers()" in micro["traceback"]
    assert "micro" not in doc
    assert doc["figures"]["anthropic_openai_cpu_ratio"] > 0
    report = (out / "latest.md").read_text()
    assert "### micro failed" in report and "in breaks" in report

    # re-measuring one section keeps the others, with their provenance
    monkeypatch.undo()
    assert main(["--smoke", "--only", "micro", "--out", str(out), "--probe-s", "0"]) == 0
    doc = json.loads((out / "latest.json").read_text())
    assert doc["sections"]["micro"]["status"] == "ok" and doc["micro"]
    assert doc["sections"]["providers"] == micro_free(doc)["providers"] and doc["providers"]


def test_stored_results_this_bench_cannot_read_are_dropped_not_fatal(tmp_path):
    """Results an earlier bench wrote in another shape (throughput cells without their repetition)
    do not stop the next run at its first write: that section is marked failed, the others count."""
    out = tmp_path / "results"
    assert main(["--smoke", "--only", "providers", "--out", str(out), "--probe-s", "0"]) == 0
    doc = json.loads((out / "latest.json").read_text())
    cell = {"variant": "floor", "agents": 2, "steps": 2, "steps_per_s": 10.0, "cpu_ms_per_step": 1.0}
    doc["throughput"] = [cell, {**cell, "variant": "ratchet"}]  # no "rep": an earlier bench's cells
    doc["sections"]["throughput"] = {**doc["sections"]["providers"]}
    (out / "latest.json").write_text(json.dumps(doc))
    assert main(["--smoke", "--only", "policy", "--out", str(out), "--probe-s", "0"]) == 0
    doc = json.loads((out / "latest.json").read_text())
    assert doc["sections"]["policy"]["status"] == "ok" and doc["sections"]["providers"]["status"] == "ok"
    throughput = doc["sections"]["throughput"]
    assert throughput["status"] == "failed" and "cannot be read by this bench" in throughput["traceback"]
    assert "KeyError: 'rep'" in throughput["traceback"] and "throughput" not in doc
    assert "throughput_ratio" not in doc["figures"] and doc["figures"]["anthropic_openai_cpu_ratio"] > 0


def micro_free(doc):
    return {k: v for k, v in doc["sections"].items() if k != "micro"}


def test_the_bench_own_processes_are_not_counted_as_other_work():
    before = quiet.read()
    burner = subprocess.Popen([sys.executable, "-c", "import time\nwhile time.process_time() < 0.5: pass"])
    burner.wait(timeout=60)
    after = quiet.read()
    # the child's 0.5 s of CPU belongs to the bench (reaped into its cutime), whatever else the machine does
    assert after.mine_s - before.mine_s >= 0.45
    during = quiet.between(before, after)
    assert during["bench_cores"] * during["wall_s"] >= 0.4  # rounded to 0.01 core


def test_a_busy_machine_or_a_slow_floor_makes_a_section_not_comparable():
    assert quiet.verdict({"foreign_cores": 0.1, "steal_share": 0.0}) == (True, "")
    ok, why = quiet.verdict({"foreign_cores": 1.2, "steal_share": 0.0})
    assert not ok and "1.20 cores" in why
    ok, why = quiet.verdict({"foreign_cores": 0.0, "steal_share": 0.2})
    assert not ok and "steal" in why
    assert quiet.floor_verdict(20.7, 55.0)[0] is False
    assert quiet.floor_verdict(50.0, 55.0) == (True, "")
    assert quiet.floor_verdict(20.7, None) == (True, "")


def test_probe_waits_the_time_it_is_given():
    began = time.monotonic()
    reading = quiet.probe(0.2)
    assert time.monotonic() - began >= 0.2 and reading["wall_s"] >= 0.2
