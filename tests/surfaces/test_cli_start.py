"""`ratchet start` tells the truth (issue 38): the model from flags, offline with --script, a run that
fails at once said so with its reason, an id in use refused unless --new-run; as a subprocess."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from tests.runs import ratchet, runs

pytestmark = pytest.mark.e2e  # processes as a user runs them: `make test-e2e`, not `make test`

HELLO_SCRIPT = Path(__file__).parents[2] / "examples" / "hello-script.json"


def fresh(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:6]}"


async def test_the_readme_start_runs_offline_and_an_id_in_use_needs_new_run(client, settings, worker):
    hello = fresh("hello")
    code, out = await ratchet(settings, "start", "coder", "Create hello.txt", "--id", hello,
                              "--script", str(HELLO_SCRIPT), "--follow")
    assert code == 0 and f"started {hello}" in out and "[DONE]" in out, out
    assert (settings.workspace_root / hello / "hello.txt").read_text() == "hi\n"

    code, out = await ratchet(settings, "start", "coder", "again", "--id", hello, "--script", str(HELLO_SCRIPT))
    assert code == 1 and "started" not in out, out
    assert f"a run with id '{hello}' exists already: it has ended DONE (COMPLETED); --new-run starts" in out, out
    assert len(await runs(client, settings).list(query=f'WorkflowId="{hello}"')) == 1

    code, out = await ratchet(settings, "start", "coder", "again", "--id", hello, "--script", str(HELLO_SCRIPT),
                              "--new-run")
    assert code == 0 and out.splitlines()[0] == f"started {hello}", out


async def test_a_run_that_fails_at_once_is_said_so_with_its_reason(client, settings, worker):
    typo = fresh("typo")
    code, out = await ratchet(settings, "start", "codr", "x", "--id", typo, "--script", str(HELLO_SCRIPT))
    assert code == 1, out
    assert f"{typo} failed at once: InvalidInput: agent: unknown profile 'codr'" in out, out

    code, out = await ratchet(settings, "start", "coder", "x", "--id", typo, "--script", str(HELLO_SCRIPT))
    assert code == 1 and "it has ended FAILED;" in out and "--new-run" in out, out

    code, out = await ratchet(settings, "start", "coder", "x", "--provider", "no-such-provider")
    assert code == 1 and "failed at once" in out and "no-such-provider" in out, out


async def test_provider_and_model_flags_set_the_runs_model(client, settings, worker):
    run_id = fresh("flags")
    code, out = await ratchet(settings, "start", "coder", "x", "--id", run_id, "--provider", "openai",
                              "--model", "gpt-test-1")
    assert code == 0 and out.strip() == f"started {run_id}", out
    state = await runs(client, settings).get(run_id).state()
    assert state.run.model is not None
    assert (state.run.model.provider, state.run.model.model) == ("openai", "gpt-test-1")
    await runs(client, settings).get(run_id).terminate("test over")

    code, out = await ratchet(settings, "start", "coder", "x", "--provider", "openai", "--script", str(HELLO_SCRIPT))
    assert code == 2 and "--script is the scripted provider's, not 'openai''s" in out, out
