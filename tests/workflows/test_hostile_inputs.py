"""The hostile-input catalogue (devtools/chaos/hostile.py), one test per case, against the session
dev server and a real worker process (so a crash shows as a dead process, not a dead test run). The
worker holds test values of the keys a model would steal and runs programs in the nsjail sandbox
(`WORKER_ENV`), for the exfiltration cases."""

from __future__ import annotations

import pytest

import devtools.chaos.hostile_cases  # noqa: F401  (registers the cases)
import devtools.chaos.hostile_live  # noqa: F401
from devtools.chaos.hostile import CASES, Outcome, Probe, make_outside, run_catalogue
from devtools.chaos.hostile_cases import WORKER_ENV
from devtools.chaos.stack import Stack

pytestmark = pytest.mark.e2e  # slow: `make test-e2e`, not `make test`

KNOWN_BUGS: dict[str, str] = {}  # case name -> reason, for an open bug (strict xfail)
GLOBAL_CHECKS = ["nothing outside the workspace changed", "worker keeps serving"]


def _param(name: str):
    if name in KNOWN_BUGS:
        return pytest.param(name, marks=pytest.mark.xfail(strict=True, reason=KNOWN_BUGS[name]))
    return name


@pytest.fixture(scope="module")
async def catalogue(dev_server, client, tmp_path_factory) -> tuple[dict[str, Outcome], int | None]:
    base = tmp_path_factory.mktemp("hostile")
    stack = Stack(base, dev_server.address, cached_workflows=100, env=WORKER_ENV)  # replay on every task: elsewhere
    worker = await stack.worker(base / "worker.log").start()
    try:
        outcomes = await run_catalogue(Probe(stack, client, make_outside(base)))
        survived = worker.alive()
    finally:
        code = await worker.terminate()
    return {o.case: o for o in outcomes}, code if survived else None


@pytest.mark.parametrize("name", [_param(n) for n in [*CASES, *GLOBAL_CHECKS]])
async def test_hostile_input_gets_a_clear_error_and_leaves_no_run_stuck(catalogue, name):
    outcomes, _ = catalogue
    outcome = outcomes[name]
    assert outcome.ok, f"{outcome.case} via {outcome.surface}: {outcome.outcome}\n" + "\n".join(outcome.problems)


async def test_the_worker_process_survived_the_catalogue_and_stops_cleanly(catalogue):
    _, exit_code = catalogue
    assert exit_code is not None, "the worker process died while serving hostile input"
    assert exit_code == 0, f"the worker exited {exit_code} on SIGTERM"


def test_the_catalogue_covers_every_surface():
    surfaces = " ".join(surface for surface, _ in CASES.values())
    for surface in ("temporal CLI", "raw payload", "update", "signal", "query", "model tool arguments"):
        assert surface in surfaces
