"""Sessions under faults in CI (#24 item 8): a few sessions asked turn after turn, some messages
while a turn runs, while the worker is SIGKILLed and the dev server restarts; every turn answered
once, in order, each turn's ticket opened once (`make chaos` runs 20 sessions of 10 turns)."""

from __future__ import annotations

from pathlib import Path

import pytest

import tests.plugins.chaos_tools  # noqa: F401  (the chaos profiles, in this process too)
from devtools.chaos.sessions import SessionsOptions, run_sessions


@pytest.mark.e2e
async def test_sessions_survive_sigkills_and_a_server_restart(tmp_path: Path):
    # a turn's replies are 66 characters: at 50 a second its four turns take 5 s at least, so the
    # first kill (2.9 s in, for this seed) and the restart (4 s) come while turns run, however fast
    # the machine (on an idle one all 12 turns were once answered before the first kill)
    opts = SessionsOptions(
        sessions=3, turns=4, seed=3, kill_every=(2.0, 6.0), restart_after_s=4.0, deadline_s=240.0, base=tmp_path,
        model_chars_per_s=50.0, max_kills=2,
    )
    done = await run_sessions(opts, log=lambda line: None)
    figures = done.figures
    assert figures.ok, figures.line() + "\n" + "\n".join(figures.problems)
    assert figures.kills >= 1
    assert figures.line() == (
        "sessions=3 turns=12 answered=12 lost=0 duplicate_answers=0 duplicate_effects=0 out_of_order=0"
    )
