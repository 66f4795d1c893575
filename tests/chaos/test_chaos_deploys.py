"""Deploys under faults in CI (#39 item 6): a few sessions and one-shot runs while the current build
goes v1 -> v2 -> v1 (v1 a pinned earlier commit laid out from git, v2 the working tree), each
version's worker SIGKILLed and the dev server restarted after the first deploy; no turn or run
lost, no effect twice, no non-determinism, every session moved at both deploys, every one-shot run
finished on its build (`make chaos` runs 10 sessions and 10 runs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from devtools.chaos.deploys import DeploysOptions, run_deploys


@pytest.mark.e2e
async def test_deploys_v1_v2_v1_survive_sigkills_and_a_server_restart(tmp_path: Path):
    opts = DeploysOptions(
        sessions=2,
        runs=2,
        seed=3,
        kill_every=(2.0, 6.0),
        max_kills=1,
        restart_after_s=1.0,
        deadline_s=240.0,
        base=tmp_path,
    )
    done = await run_deploys(opts, log=lambda line: None)
    figures = done.figures
    assert figures.ok, figures.line() + "\n" + "\n".join(figures.problems)
    assert figures.kills >= 1 and figures.builds[0] != figures.builds[1]
    assert figures.line() == "deploys=2 lost=0 duplicate_effects=0 nondeterminism=0 upgraded=4 pinned_finished=2"
