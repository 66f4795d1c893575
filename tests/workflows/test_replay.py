"""The replay deploy gate: the committed corpus replays against today's AgentWorkflow, a changed
workflow is caught and located in agent terms, and `ratchet replay` exits as CI needs.

Re-record the corpus after an intended change of workflow logic with `make histories`. Once a
release is tagged, a change that would break its histories goes behind `workflow.patched`
(docs/REPLAY.md) and the release's recordings stay in the corpus.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from pydantic import SecretStr
from temporalio import workflow
from temporalio.client import Client
from temporalio.common import RawValue

from devtools.histories.scenarios import SCENARIOS, recorded_id, workflow_id
from ratchet.contracts import AgentResult, Phase
from ratchet.payloads.converter import data_converter
from ratchet.replay.gate import DEFAULT_QUERY, exit_code, replay_paths, table
from ratchet.replay.outcomes import ERROR, FAILED, NONDETERMINISTIC, OK
from ratchet.worker.main import build_worker
from ratchet.workflows import step as step_module
from ratchet.workflows.agent import AgentWorkflow
from ratchet.workflows.closed_rollback import RollbackWorkflow
from tests.runs import scripted, start, until

ROOT = Path(__file__).resolve().parents[2]
HISTORIES = ROOT / "tests" / "histories"
CORPUS = sorted(HISTORIES.glob("*.json"))


# Unsandboxed: the sandbox would re-import this test module, and replay needs no sandbox to
# compare commands with the history.
@workflow.defn(name="AgentWorkflow", sandboxed=False)
class AuditedAgentWorkflow(AgentWorkflow):
    """Today's workflow plus an activity before anything else: a change that needs a patch."""

    @workflow.run
    async def run(self, raw: RawValue = None) -> AgentResult:  # type: ignore[assignment]
        await workflow.execute_activity("audit.record", "start", start_to_close_timeout=timedelta(seconds=5))
        return await super().run(raw)


# A change inside a step: the model call of every step (workflows/step.py `think`) replaced, as a
# developer's edit of that module would, for the duration of one replay.
_think = step_module.think


async def _moderated_think(state, plan, phases):  # noqa: ANN001  (think's own signature)
    """Today's model call plus an activity before every one after the first."""
    if state.step >= 2:
        await workflow.execute_activity("model.moderate", state.step, start_to_close_timeout=timedelta(seconds=5))
    return await _think(state, plan, phases)


async def _patched_moderated_think(state, plan, phases):  # noqa: ANN001
    """The same change behind workflow.patched(): old runs keep the old path (docs/REPLAY.md)."""
    if state.step >= 2 and workflow.patched("moderate-model-calls"):
        await workflow.execute_activity("model.moderate", state.step, start_to_close_timeout=timedelta(seconds=5))
    return await _think(state, plan, phases)


async def _broken_think(state, plan, phases):  # noqa: ANN001
    """Today's model call with a bug that raises before the second one."""
    if state.step >= 2:
        raise RuntimeError("a bug in the new code")
    return await _think(state, plan, phases)


SCRIPT = [{"tool_calls": [{"name": "probe_append", "arguments": {"label": "a"}}]}, {"content": "done"}]


def quiet(line: str) -> None:
    pass


def test_every_scenario_has_a_recorded_history():
    assert {p.stem for p in CORPUS} >= set(SCENARIOS), "run `make histories` to record the new scenarios"


@pytest.mark.parametrize("path", CORPUS, ids=[str(p.relative_to(HISTORIES).with_suffix("")) for p in CORPUS])
async def test_committed_history_replays(path: Path):
    [outcome] = await replay_paths([path], progress=quiet)
    assert outcome.result == OK, (
        f"{path.name}: {outcome.result} at {outcome.divergence}: {outcome.detail}\n"
        "an intended change of workflow logic needs workflow.patched() (docs/REPLAY.md), then `make histories`"
    )


async def test_an_extra_activity_at_the_start_is_nondeterministic_everywhere():
    """... in every run's history; the rollback of a closed run (RollbackWorkflow, unchanged) replays."""
    outcomes = await replay_paths([HISTORIES], workflows=[AuditedAgentWorkflow, RollbackWorkflow], progress=quiet)
    by_id = {o.workflow_id: o for o in outcomes}
    assert by_id.pop(recorded_id("closed-rollback")).result == OK, table(outcomes)
    assert [o.result for o in by_id.values()] == [NONDETERMINISTIC] * (len(CORPUS) - 1), table(outcomes)
    assert by_id[workflow_id("plain-run")].divergence == "before step 1, run.prepare", table(outcomes)
    assert by_id[workflow_id("invalid-input")].divergence.startswith("at ")  # its one task, no activity
    assert exit_code(outcomes) == 1


async def test_an_extra_activity_before_later_model_calls_is_located_at_step_2(monkeypatch):
    monkeypatch.setattr(step_module, "think", _moderated_think)
    outcomes = await replay_paths([HISTORIES], workflows=[AgentWorkflow, RollbackWorkflow], progress=quiet)
    by_id = {o.workflow_id: o for o in outcomes}
    for single_step in ("invalid-input", "model-401"):  # no second model call to diverge at
        assert by_id[workflow_id(single_step)].result == OK, table(outcomes)
    for name in ("plain-run", "tool-retry", "bad-tool-calls", "budget-exhausted"):
        outcome = by_id[workflow_id(name)]
        assert (outcome.result, outcome.divergence) == (NONDETERMINISTIC, "step 2, model call"), table(outcomes)
        assert "model.moderate" in outcome.detail
    assert exit_code(outcomes) == 1


async def test_code_that_raises_in_replay_is_a_failure_located_in_agent_terms(monkeypatch):
    monkeypatch.setattr(step_module, "think", _broken_think)
    [outcome] = await replay_paths([HISTORIES / "tool-retry.json"], workflows=[AgentWorkflow], progress=quiet)
    assert (outcome.result, outcome.divergence) == (FAILED, "step 2, model call"), table([outcome])
    assert "a bug in the new code" in outcome.detail
    assert exit_code([outcome]) == 1


async def test_the_same_change_behind_a_patch_replays_clean(monkeypatch):
    monkeypatch.setattr(step_module, "think", _patched_moderated_think)
    outcomes = await replay_paths([HISTORIES], workflows=[AgentWorkflow, RollbackWorkflow], progress=quiet)
    assert {o.result for o in outcomes} == {OK}, table(outcomes)


async def ratchet_replay(*args: str, address: str = "127.0.0.1:1", **extra_env: str) -> tuple[int, str]:
    env = {k: v for k, v in os.environ.items() if k != "RATCHET_CODEC_KEYS"}
    env.update(TEMPORAL_ADDRESS=address, **extra_env)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "ratchet.cli.main", "replay", *args, cwd=ROOT, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(proc.communicate(), timeout=60)
    return proc.returncode, out.decode()


async def visible(client: Client, query: str, count: int) -> None:
    async def counted() -> bool:  # visibility is eventually consistent
        return (await client.count_workflows(query)).count == count

    await until(counted, f"{count} runs match {query}")


async def test_replay_server_finds_and_replays_the_runs(client, dev_server, settings, worker):
    handles = []
    # One after the other: with max_cached_workflows=0, two runs whose first workflow tasks overlap
    # can lose a run.prepare local activity and wait out the 10 s workflow task timeout.
    for _ in range(2):
        handles.append(handle := await start(client, settings, scripted("probe", SCRIPT)))
        assert (await handle.result()).phase == Phase.DONE
    query = f'{DEFAULT_QUERY} AND TaskQueue="{settings.task_queue}"'  # the default query is one the server takes
    await visible(client, query, 2)
    code, out = await ratchet_replay("--server", "--query", query, "--limit", "10", address=dev_server.address)
    assert code == 0, out
    for handle in handles:
        assert any(line.startswith(handle.workflow_id) and f" {OK}" in line for line in out.splitlines()), out


async def test_replay_reports_a_garbage_file_as_an_error(tmp_path: Path):
    (tmp_path / "garbage.json").write_text("{not a history")
    (tmp_path / "no-events.json").write_text(json.dumps({"events": []}))
    (tmp_path / "good.json").write_bytes(CORPUS[0].read_bytes())
    other = json.loads(CORPUS[0].read_text())
    other["events"][0]["workflowExecutionStartedEventAttributes"]["workflowType"]["name"] = "OtherWorkflow"
    (tmp_path / "other-type.json").write_text(json.dumps(other))
    code, out = await ratchet_replay(str(tmp_path))
    assert code == 2, out
    rows = [line.split() for line in out.splitlines() if line and not line.startswith(("[", "replaying"))]
    assert [row[2] for row in rows[1:]] == [ERROR, OK, ERROR, ERROR], out
    assert "is not a JSON history" in out and "'OtherWorkflow' is not replayed here" in out


async def test_an_idle_cluster_passes_the_gate_unless_min_asks_for_histories(dev_server):
    query = 'WorkflowId="no-such-run-anywhere"'
    code, out = await ratchet_replay("--server", "--query", query, address=dev_server.address)
    assert code == 0, out
    assert f"no runs match {query}" in out and "no histories to replay: nothing to check" in out
    code, out = await ratchet_replay("--server", "--query", query, "--min", "1", address=dev_server.address)
    assert code == 2, out
    assert "0 histories replayed, fewer than --min 1" in out


async def test_the_table_names_the_file_of_each_history(tmp_path: Path):
    for folder in ("a", "b"):  # the same workflow id in two files: the SOURCE column tells them apart
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "h.json").write_bytes(CORPUS[0].read_bytes())
    code, out = await ratchet_replay(str(tmp_path / "a"), str(tmp_path / "b"))
    assert code == 0, out
    assert any(line.startswith("WORKFLOW ID") and "SOURCE" in line for line in out.splitlines()), out
    assert str(tmp_path / "a" / "h.json") in out and str(tmp_path / "b" / "h.json") in out, out


async def test_replay_reports_an_unreachable_server_as_an_error():
    code, out = await ratchet_replay("--server")
    assert code == 2, out
    assert ERROR in out and "server" in out


async def test_encrypted_runs_replay_with_the_workers_keys_and_are_an_error_without(client, dev_server, settings):
    keys = "k1:" + base64.b64encode(os.urandom(32)).decode()
    keyed = settings.model_copy(update={"codec_keys": SecretStr(keys)})
    encrypting = await Client.connect(dev_server.address, data_converter=data_converter(keyed))
    async with build_worker(encrypting, keyed):
        handle = await start(encrypting, keyed, scripted("probe", SCRIPT))
        assert (await handle.result()).phase == Phase.DONE
    query = f'WorkflowId="{handle.workflow_id}"'
    await visible(client, query, 1)
    code, out = await ratchet_replay("--server", "--query", query, address=dev_server.address, RATCHET_CODEC_KEYS=keys)
    assert code == 0, out
    code, out = await ratchet_replay("--server", "--query", query, address=dev_server.address)
    assert code == 2, out
    assert "cannot decode the history" in out and "RATCHET_CODEC_KEYS" in out


async def test_runs_with_offloaded_payloads_replay_where_their_blobs_are(client, dev_server, settings, tmp_path, monkeypatch):
    big = settings.model_copy(update={"claim_check_bytes": 4096})
    script = [{"tool_calls": [{"name": "write_file", "arguments": {"path": "big.txt", "content": "z" * 20_000}}]},
              {"content": "done"}]
    offloading = await Client.connect(dev_server.address, data_converter=data_converter(big))
    async with build_worker(offloading, big):
        handle = await start(offloading, big, scripted("probe", script, workspace="w"))
        assert (await handle.result()).phase == Phase.DONE
    raw = b"".join(e.SerializeToString() for e in (await handle.history()).events)  # as stored: payloads not decoded
    assert b"temporal.api.sdk.v1.ExternalStorageReference" in raw and b"z" * 5000 not in raw
    query = f'WorkflowId="{handle.workflow_id}"'
    await visible(client, query, 1)
    monkeypatch.setenv("TEMPORAL_ADDRESS", dev_server.address)
    monkeypatch.delenv("RATCHET_CODEC_KEYS", raising=False)
    monkeypatch.setenv("RATCHET_ARTIFACT_DIR", str(big.artifact_dir))
    [outcome] = await replay_paths([], server_query=query, progress=quiet)
    assert outcome.result == OK, table([outcome])
    monkeypatch.setenv("RATCHET_ARTIFACT_DIR", str(tmp_path / "elsewhere"))
    [outcome] = await replay_paths([], server_query=query, progress=quiet)
    assert outcome.result == ERROR, table([outcome])
    assert "cannot decode the history" in outcome.detail and "offloaded payload" in outcome.detail
    assert "RATCHET_ARTIFACT_DIR" in outcome.detail
