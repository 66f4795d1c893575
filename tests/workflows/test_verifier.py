"""Evidence is evidence: a verifier that ran no test does not pass a step (its checkpoint is kept,
marked unverified, and the model is told), and a run of a profile that runs programs names its own
verifier (a repository's own tests). On the dev server, the scripted model, the real verifier."""

from __future__ import annotations

from datetime import timedelta

import pytest

from ratchet.activities.checkpoints import count_tests
from ratchet.client import RunFailed
from ratchet.contracts import Phase
from ratchet.worker.main import build_worker
from tests.runs import call, scripted, start

PASSING_TEST = "def test_hello():\n    assert open('hello.txt').read() == 'hi\\n'\n"
WRITE_HELLO = [{"tool_calls": [call("write_file", path="hello.txt", content="hi\n")]}, {"content": "wrote hello.txt"}]


def workspace(settings, name: str, files: dict[str, str]) -> None:
    root = settings.workspace_root / name
    root.mkdir(parents=True)
    for path, text in files.items():
        (root / path).write_text(text)


async def test_a_verifier_that_ran_no_test_leaves_an_unverified_checkpoint(client, settings, worker):
    """The coder's `python -m unittest` in a workspace without tests exits 0 having run none."""
    workspace(settings, "bare", {"README": "no tests here\n"})
    handle = await start(client, settings, scripted("coder", WRITE_HELLO, workspace="bare"))
    result = await handle.result()
    state = await handle.state()
    assert result.phase == Phase.DONE, result.last_error
    [checkpoint] = state.effects.checkpoints.items
    evidence = checkpoint.evidence
    assert evidence is not None and evidence.exit_code == 0 and evidence.tests_run == 0
    assert evidence.no_tests and not evidence.passed and checkpoint.verified is False
    assert "ran no test: unverified" in checkpoint.summary
    assert checkpoint.workspace_ref is not None  # kept: a rollback or a fork can come back to it
    assert (settings.workspace_root / "bare" / "hello.txt").read_text() == "hi\n" and not state.effects.rollbacks
    told = [m.content for m in state.conversation.messages.items if m.role == "user" and m.content]
    assert any(text.startswith("Verification ran no test") for text in told)


async def test_a_run_names_its_own_verifier_and_pytest_counts(client, settings, worker):
    """pytest over the repository's own tests: one test collected and passed is a verified step."""
    workspace(settings, "repo", {"test_hello.py": PASSING_TEST})
    verifier = {"argv": ["python", "-m", "pytest", "-q", "-p", "no:cacheprovider"], "timeout_s": 120}
    handle = await start(client, settings, scripted("coder", WRITE_HELLO, workspace="repo", verifier=verifier))
    result = await handle.result()
    assert result.phase == Phase.DONE, result.last_error
    [checkpoint] = (await handle.state()).effects.checkpoints.items
    evidence = checkpoint.evidence
    assert evidence is not None and evidence.argv == verifier["argv"], evidence
    assert evidence.passed and checkpoint.verified is True and (evidence.tests_run, evidence.tests_failed) == (1, 0)
    assert checkpoint.summary.endswith("passed (1 tests)")


@pytest.mark.parametrize("quiet", ["-q", "-qq"])  # -qq: no summary line, only the exit code says it
async def test_pytest_collecting_no_test_is_unverified_not_failed(client, settings, worker, quiet):
    """pytest's exit code 5 (no tests collected) is neither a pass nor a failure to revert."""
    workspace(settings, "empty", {"README": "nothing to collect\n"})
    verifier = {"argv": ["python", "-m", "pytest", quiet, "-p", "no:cacheprovider"]}
    handle = await start(client, settings, scripted("coder", WRITE_HELLO, workspace="empty", verifier=verifier))
    result = await handle.result()
    state = await handle.state()
    assert result.phase == Phase.DONE, result.last_error
    [checkpoint] = state.effects.checkpoints.items
    assert checkpoint.evidence is not None and checkpoint.evidence.exit_code == 5, checkpoint.evidence
    assert checkpoint.evidence.no_tests and checkpoint.verified is False and not state.effects.rollbacks
    assert (settings.workspace_root / "empty" / "hello.txt").exists()


async def test_a_failing_own_verifier_still_reverts_the_step(client, settings, worker):
    failing = "def test_hello():\n    assert open('hello.txt').read() == 'bye\\n'\n"
    workspace(settings, "strict", {"test_hello.py": failing})
    verifier = {"argv": ["python", "-m", "pytest", "-q", "-p", "no:cacheprovider"]}
    handle = await start(client, settings, scripted("coder", WRITE_HELLO, workspace="strict", verifier=verifier))
    await handle.result()
    state = await handle.state()
    assert not state.effects.checkpoints.items and state.effects.rollbacks and state.effects.rollbacks[0].clean
    assert not (settings.workspace_root / "strict" / "hello.txt").exists()
    assert any("Verification failed" in (m.content or "") for m in state.conversation.messages.items)


async def test_a_profile_that_runs_no_programs_refuses_a_runs_verifier(client, settings, worker):
    run = scripted("ops", [{"content": "done"}], verifier={"argv": ["sh", "-c", "echo pwned"]})
    with pytest.raises(RunFailed) as failure:
        await (await start(client, settings, run)).result()
    assert "verifier: profile 'ops' runs no programs" in failure.value.reason, failure.value.reason


async def test_a_workspace_a_verifier_passed_is_not_verified_again(client, settings, worker):
    """The second run's final answer on the same files reuses the first run's evidence (the
    verifier prints a fresh token each time it runs); a changed file runs it again."""
    workspace(settings, "again", {"README": "unchanged\n"})
    verifier = {"argv": ["python", "-c", "import uuid; print('Ran 1 test', uuid.uuid4())"]}
    answer = [{"content": "nothing to change"}]
    evidence = []
    for script in (answer, answer, WRITE_HELLO):
        handle = await start(client, settings, scripted("coder", script, workspace="again", verifier=verifier))
        assert (await handle.result()).phase == Phase.DONE
        [checkpoint] = (await handle.state()).effects.checkpoints.items
        assert checkpoint.verified and checkpoint.workspace_ref is not None
        evidence.append(checkpoint)
    first, second, third = (c.evidence for c in evidence)
    assert not first.reused and second.reused and second.output == first.output and second.passed
    assert evidence[1].workspace_ref == evidence[0].workspace_ref
    assert not third.reused and third.output != first.output  # hello.txt is new: verified anew


async def test_a_kept_verification_outlives_the_worker_that_made_it(client, settings):
    """Kept in the ledger, not in the worker: a fresh worker (a restart, a deploy) reuses the
    evidence for the same files, and a different verifier on them runs."""
    workspace(settings, "restart", {"README": "unchanged\n"})
    verifier = {"argv": ["python", "-c", "import uuid; print('Ran 1 test', uuid.uuid4())"]}
    other = {"argv": ["python", "-c", "import uuid; print('Ran 2 tests', uuid.uuid4())"]}
    answer = [{"content": "nothing to change"}]
    evidence = []
    for checks in (verifier, verifier, other):
        async with build_worker(client, settings, graceful_shutdown_timeout=timedelta(0)):
            handle = await start(client, settings, scripted("coder", answer, workspace="restart", verifier=checks))
            assert (await handle.result()).phase == Phase.DONE
            [checkpoint] = (await handle.state()).effects.checkpoints.items
            evidence.append(checkpoint.evidence)
    first, second, third = evidence
    assert not first.reused and second.reused and second.output == first.output
    assert not third.reused and third.tests_run == 2


async def test_a_workspace_where_the_verifier_found_no_test_is_not_verified_again(client, settings, worker):
    """No test found is as deterministic as a pass: the same files give the same answer, so the
    second run reuses it (the verifier prints a fresh token each time it runs)."""
    workspace(settings, "none", {"README": "unchanged\n"})
    verifier = {"argv": ["sh", "-c", "echo Ran 0 tests $(cat /proc/sys/kernel/random/uuid)"]}
    answer = [{"content": "nothing to change"}]
    evidence = []
    for script in (answer, answer):
        handle = await start(client, settings, scripted("coder", script, workspace="none", verifier=verifier))
        assert (await handle.result()).phase == Phase.DONE
        [checkpoint] = (await handle.state()).effects.checkpoints.items
        evidence.append(checkpoint.evidence)
    first, second = evidence
    assert first.no_tests and second.no_tests and not first.reused and second.reused
    assert second.output == first.output


@pytest.mark.parametrize(
    ("output", "counts"),
    [
        ("Ran 0 tests in 0.000s\n\nOK", (0, 0)),
        ("Ran 2 tests in 0.001s\n\nFAILED (failures=1)", (2, 1)),
        ("..\n2 passed in 0.01s", (2, 0)),
        ("=========== 1 failed in 0.10s ===========", (1, 1)),  # no pass: was not counted at all
        ("1 failed, 3 passed, 1 warning in 1.20s", (4, 1)),
        ("========== no tests ran in 0.01s ==========", (0, 0)),
        ("1 skipped in 0.01s", (0, 0)),  # a skipped test showed nothing
        ("1 error in 0.20s", (1, 1)),
        ("make: all good", (None, None)),
    ],
)
def test_the_verifiers_output_is_counted(output, counts):
    assert count_tests(output) == counts
