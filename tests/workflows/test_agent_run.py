"""The walking skeleton on the real dev server: scripted and openai paths, errors, budgets."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import uuid

import pytest

from devtools.demo import FIXED_CALC, SAMPLE, demo_script
from ratchet.client import RunFailed
from ratchet.contracts import AGENT_WORKFLOW, AgentResult, Phase
from tests.runs import activity_attempts, runs, scripted, start


def seed_calculator(settings, name: str) -> None:
    shutil.copytree(SAMPLE, settings.workspace_root / name)


async def test_demo_agent_fixes_the_bug_with_the_scripted_provider(client, settings, worker):
    seed_calculator(settings, "calc")
    handle = await start(client, settings, scripted("coder", demo_script(), workspace="calc"))
    result = await handle.result()
    assert result.phase == Phase.DONE, result.last_error
    assert "tests pass" in result.answer
    state = await handle.state()
    assert [r.result.output.splitlines()[0] for r in state.calls.tool_calls.items if r.tool == "run_command"] == ["exit code 1"]
    # the good patch became a checkpoint with its diff and test evidence ...
    [checkpoint] = state.effects.checkpoints.items
    assert checkpoint.evidence.passed and checkpoint.evidence.tests_run == 2
    assert checkpoint.patch_ref is not None and checkpoint.workspace_ref is not None
    # ... the bad one failed verification and was reverted to it, byte for byte
    [report] = state.effects.rollbacks
    assert report.checkpoint_id == "cp-1" and len(report.undone) == 1 and report.clean
    assert (settings.workspace_root / "calc" / "calc.py").read_text() == FIXED_CALC
    assert "Verification failed" in state.conversation.messages.items[-2].content


async def test_demo_agent_through_the_openai_client(client, settings, worker, openai_server):
    seed_calculator(settings, "calc")
    openai_server.set_script(demo_script(), key=os.environ["OPENAI_API_KEY"])
    handle = await start(client, settings, {"agent": "coder", "objective": "fix it", "workspace": "calc"})
    result = await handle.result()
    assert result.phase == Phase.DONE, result.last_error
    assert "return a + b" in (settings.workspace_root / "calc" / "calc.py").read_text()
    requests = openai_server.chat_requests(key=os.environ["OPENAI_API_KEY"])
    assert len(requests) == 5
    assert requests[0].json["tools"][0]["function"]["name"] == "list_files"
    assert requests[0].headers["idempotency-key"] == f"{handle.workflow_id}/1/model"
    assert result.used.prompt_tokens > 0


async def test_rate_limit_is_retried_and_visible_in_history(client, settings, worker, openai_server):
    key = os.environ["OPENAI_API_KEY"]
    openai_server.set_script([{"content": "done"}], key=key)
    openai_server.enqueue_faults([{"status": 429, "retry_after": 1}], key=key)
    handle = await start(client, settings, {"agent": "probe", "objective": "x"})
    result = await handle.result()
    assert result.phase == Phase.DONE
    assert await activity_attempts(handle, "model.call") == [2]


async def test_a_scripted_model_can_read_its_replies_from_a_file_in_the_workspace(client, settings, worker):
    """A long script need not travel in the run input (nor again in the first model call)."""
    workspace = settings.workspace_root / "scripted"
    workspace.mkdir(parents=True)
    replies = [{"tool_calls": [{"name": "probe_append", "arguments": {"label": "from-file"}}]}, {"content": "file script done"}]
    (workspace / "script.json").write_text(json.dumps(replies))
    (workspace / "bad.json").write_text(json.dumps([{"content": "ok"}, {"tool_calls": "nope"}]))
    run = {"agent": "probe", "objective": "x", "workspace": "scripted"}
    handle = await start(client, settings, {**run, "model": {"provider": "scripted", "options": {"script_file": "script.json"}}})
    assert (await handle.result()).answer == "file script done"
    assert "from-file" in (workspace / "probe.log").read_text()
    for name, expected in [
        ("missing.json", "model.options.script_file: 'missing.json' is not in the run's workspace"),
        ("../escape.json", "contains '..'"),
        ("bad.json", "model.options.script_file: 'bad.json' is not a list of scripted replies: at 1.tool_calls"),
    ]:
        failed = await start(client, settings, {**run, "model": {"provider": "scripted", "options": {"script_file": name}}})
        with pytest.raises(RunFailed) as failure:
            await failed.result()
        assert expected in str(failure.value.reason), failure.value.reason


async def test_bad_api_key_fails_the_run_at_once(client, settings, worker, openai_server):
    key = os.environ["OPENAI_API_KEY"]
    openai_server.enqueue_faults([{"status": 401}], key=key)
    handle = await start(client, settings, {"agent": "probe", "objective": "x"})
    with pytest.raises(RunFailed) as failure:
        await handle.result()
    assert "401" in str(failure.value.reason) and "OPENAI_API_KEY" in str(failure.value.reason)
    assert len(openai_server.chat_requests(key=key)) == 1
    assert (await handle.state()).phase == Phase.FAILED


async def test_malformed_tool_call_json_goes_back_to_the_model(client, settings, worker, openai_server):
    key = os.environ["OPENAI_API_KEY"]
    openai_server.set_script(
        [{"tool_calls": [{"name": "probe_append", "arguments": {"label": "a"}}]}, {"content": "recovered"}], key=key
    )
    openai_server.enqueue_faults([{"bad_tool_json": True}], key=key)
    handle = await start(client, settings, {"agent": "probe", "objective": "x"})
    result = await handle.result()
    assert result.phase == Phase.DONE and result.answer == "recovered"
    state = await handle.state()
    tool_messages = [m.content for m in state.conversation.messages.items if m.role == "tool"]
    assert tool_messages[0].startswith("ERROR: tool arguments are not valid JSON")
    assert state.calls.bad_tool_calls == 1
    # the strict server parses every historical call's arguments: the cut-off ones went back as
    # valid JSON that keeps what the model wrote
    [sent] = [c for m in openai_server.chat_requests(key=key)[1].json["messages"] for c in m.get("tool_calls") or []]
    assert json.loads(sent["function"]["arguments"]) == {"invalid_json_arguments": '{"label": "a"'}


async def test_an_endpoint_that_cannot_parse_the_request_fails_the_run_without_retrying(client, settings, worker, openai_server):
    key = os.environ["OPENAI_API_KEY"]
    said = "Failed to parse tool call arguments as JSON: [json.exception.parse_error.101] parse error at line 1"
    openai_server.enqueue_faults([{"status": 500, "message": said}], key=key)
    handle = await start(client, settings, {"agent": "probe", "objective": "x"})
    with pytest.raises(RunFailed) as failure:
        await handle.result()
    assert "cannot parse the request's content" in str(failure.value.reason) and said in str(failure.value.reason)
    assert len(openai_server.chat_requests(key=key)) == 1


async def test_a_reply_cut_off_at_the_output_limit_is_not_the_final_answer(client, settings, worker, openai_server):
    key = os.environ["OPENAI_API_KEY"]
    openai_server.set_script([{"content": "The answer is", "finish_reason": "length"}, {"content": "42"}], key=key)
    handle = await start(client, settings, {"agent": "probe", "objective": "x"})
    result = await handle.result()
    assert result.phase == Phase.DONE and result.answer == "42"
    second = openai_server.chat_requests(key=key)[1].json["messages"]
    assert second[-2] == {"role": "assistant", "content": "The answer is"}
    assert second[-1]["role"] == "user" and "cut off at the output token limit" in second[-1]["content"]
    replies = [
        json.loads(e.activity_task_completed_event_attributes.result.payloads[0].data)
        for e in (await handle.history()).events if e.HasField("activity_task_completed_event_attributes")
    ]
    assert [r.get("finish_reason") for r in replies if "message" in r] == ["length", None]  # said in history
    assert all("model" not in r for r in replies if "message" in r)  # the server ran the model asked for


async def test_a_final_answer_is_verified_and_cannot_end_done_on_a_failing_check(client, settings, worker):
    (settings.workspace_root / "unverified").mkdir(parents=True)
    (settings.workspace_root / "unverified" / "BROKEN").write_text("the tests fail")
    answers = [{"content": "all done"}, {"content": "really done"}]
    failing = await start(client, settings, scripted("saga", answers, workspace="unverified", budget={"max_steps": 2}))
    result = await failing.result()
    assert result.phase == Phase.BUDGET_EXHAUSTED, result
    state = await failing.state()
    assert [m.content.split("`")[0] for m in state.conversation.messages.items if m.content and "Verification failed" in m.content] == [
        "Verification failed: ", "Verification failed: "]
    assert not state.effects.checkpoints.items
    # the same answer on a workspace that passes ends DONE, with the check as its checkpoint
    passing = await start(client, settings, scripted("saga", answers[:1], workspace="verified"))
    assert (await passing.result()).phase == Phase.DONE
    [checkpoint] = (await passing.state()).effects.checkpoints.items
    assert checkpoint.evidence.passed


async def test_a_retried_tool_sees_the_same_idempotency_key(client, settings, worker):
    script = [{"tool_calls": [{"name": "probe_append", "arguments": {"label": "a", "fail_first": True}}]}, {"content": "ok"}]
    handle = await start(client, settings, scripted("probe", script, workspace="w"))
    assert (await handle.result()).phase == Phase.DONE
    lines = (settings.workspace_root / "w" / "probe.log").read_text().splitlines()
    assert lines == [
        f"attempt 1 {handle.workflow_id}/1/call_1_0",
        f"attempt 2 {handle.workflow_id}/1/call_1_0",
        f"done {handle.workflow_id}/1/call_1_0 a",
    ]


async def test_calls_of_one_reply_are_recorded_in_the_replys_order(client, settings, worker):
    """Read-only calls of one reply run concurrently; the slow first call finishes last but is still
    recorded first (side-effecting ones run in the reply's order: tests/workflows/test_reply_order.py)."""
    script = [
        {"tool_calls": [
            {"name": "probe_wait", "arguments": {"seconds": 1.0}},
            {"name": "read_file", "arguments": {"path": "missing.txt"}},
        ]},
        {"content": "ok"},
    ]
    handle = await start(client, settings, scripted("saga", script, workspace="w"))
    assert (await handle.result()).phase == Phase.DONE
    state = await handle.state()
    assert [r.tool for r in state.calls.tool_calls.items] == ["probe_wait", "read_file"]
    assert [m.tool_call_id for m in state.conversation.messages.items if m.role == "tool"] == ["call_1_0", "call_1_1"]


async def test_a_reused_workflow_id_is_a_new_run_not_a_replay_of_the_old_one(client, settings, worker):
    """Keys are {workflow id}/{step}/{call}; a second run under a closed run's id must neither get
    the first run's recorded model replies nor skip its tool calls as already done."""
    def script(label: str) -> list[dict]:
        return [{"tool_calls": [{"name": "probe_append", "arguments": {"label": label}}]}, {"content": f"{label} done"}]

    first = await start(client, settings, scripted("probe", script("first"), workspace="w"))
    assert (await first.result()).answer == "first done"
    second = await start(client, settings, scripted("probe", script("second"), workspace="w"), workflow_id=first.workflow_id,
                         new_run=True)
    assert (await second.result()).answer == "second done"
    lines = (settings.workspace_root / "w" / "probe.log").read_text().splitlines()
    assert [line for line in lines if line.startswith("done ")] == [
        f"done {first.workflow_id}/1/call_1_0 first", f"done {first.workflow_id}/1/call_1_0 second",
    ]


async def test_a_run_with_no_cost_budget_left_makes_no_model_call(client, settings, worker):
    """What a sub-agent gets when its parent has spent its cost budget: not one paid call."""
    script = [{"tool_calls": [{"name": "probe_append", "arguments": {"label": "x"}}]}, {"content": "done"}]
    handle = await start(client, settings, scripted("probe", script, workspace="w", budget={"max_cost_usd": 0}))
    result = await handle.result()
    assert result.phase == Phase.BUDGET_EXHAUSTED and "cost budget" in result.last_error
    assert result.used.model_calls == 0 and result.used.tool_calls == 0


async def test_signals_sent_with_the_start_keep_their_order_and_a_later_resume_wins(client, settings, worker):
    """A run paused and messaged in its first task is planned by run.prepare; signals that arrive
    while it runs come after those of the first task, and a resume among them ends the pause.
    Started with Temporal's signal-with-start (the raw SDK: `ratchet.client` has no such start)."""
    script = [{"tool_calls": [{"name": "probe_append", "arguments": {"label": "a"}}]}, {"content": "done"}]
    run = scripted("probe", script, workspace="w")
    paused = await client.start_workflow(
        AGENT_WORKFLOW, run, id=f"early-pause-{uuid.uuid4().hex[:8]}", task_queue=settings.task_queue,
        result_type=AgentResult, start_signal="pause",
    )
    await paused.signal("resume")
    assert (await asyncio.wait_for(paused.result(), 60)).phase == Phase.DONE
    messaged = await client.start_workflow(
        AGENT_WORKFLOW, run, id=f"early-message-{uuid.uuid4().hex[:8]}", task_queue=settings.task_queue,
        result_type=AgentResult, start_signal="send_message", start_signal_args=["first note"],
    )
    await messaged.signal("send_message", "second note")
    assert (await messaged.result()).phase == Phase.DONE
    notes = [m.content for m in (await runs(client, settings).get(messaged.id).state()).conversation.messages.items if m.role == "user" and "note" in (m.content or "")]
    assert notes == ["first note", "second note"]


async def test_budget_exhaustion_keeps_the_state(client, settings, worker):
    loop = [{"tool_calls": [{"name": "probe_append", "arguments": {"label": str(i)}}]} for i in range(10)]
    handle = await start(client, settings, scripted("probe", loop, budget={"max_steps": 3}))
    result = await handle.result()
    assert result.phase == Phase.BUDGET_EXHAUSTED
    assert "step budget exhausted: 3 of 3" in result.last_error
    state = await handle.state()
    assert state.phase == Phase.BUDGET_EXHAUSTED
    assert [r.step for r in state.calls.tool_calls.items] == [1, 2, 3]
    assert state.used.model_calls == 3


async def test_unknown_tool_and_invalid_arguments_are_bounded(client, settings, worker):
    bad = [{"tool_calls": [{"name": "rm_rf", "arguments": {}}, {"name": "probe_append", "arguments": {"nope": 1}}]}]
    handle = await start(client, settings, scripted("probe", bad * 4))
    with pytest.raises(RunFailed) as failure:
        await handle.result()
    assert "invalid tool calls (limit 5)" in str(failure.value.reason)
    state = await handle.state()
    errors = [m.content for m in state.conversation.messages.items if m.role == "tool"][:2]
    assert errors[0].startswith("ERROR: unknown tool 'rm_rf'")
    assert "label: Field required" in errors[1]
    assert state.effects.stack.items == [], "a call refused for its arguments never ran: no effect, no undo"


async def test_file_tools_refuse_paths_outside_the_workspace(client, settings, worker, tmp_path):
    outside = tmp_path / "outside.txt"
    (settings.workspace_root / "w").mkdir(parents=True)
    (settings.workspace_root / "w" / "link").symlink_to(tmp_path)
    attempts = ["../outside.txt", str(outside), "link/outside.txt"]
    script = [{"tool_calls": [{"name": "write_file", "arguments": {"path": p, "content": "x"}} for p in attempts]}]
    handle = await start(client, settings, scripted("probe", script + [{"content": "done"}], workspace="w"))
    assert (await handle.result()).phase == Phase.DONE
    state = await handle.state()
    assert [r.result.ok for r in state.calls.tool_calls.items] == [False, False, False]
    assert "contains '..'" in state.calls.tool_calls.items[0].result.output
    assert "absolute" in state.calls.tool_calls.items[1].result.output
    assert "escapes the workspace" in state.calls.tool_calls.items[2].result.output
    assert not outside.exists()


async def test_programs_the_agent_runs_cannot_read_the_workers_credentials(client, settings, worker, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-must-not-leak")
    monkeypatch.setenv("RATCHET_CODEC_KEYS", "k1:also-secret")
    argv = ["python", "-c", "import os; print(sorted(k for k in os.environ if 'KEY' in k))"]
    script = [{"tool_calls": [{"name": "run_command", "arguments": {"argv": argv}}]}, {"content": "ok"}]
    seed_calculator(settings, "env")
    (settings.workspace_root / "env" / "calc.py").write_text(FIXED_CALC)  # "ok" is verified: the tests pass
    handle = await start(client, settings, scripted("coder", script, workspace="env"))
    assert (await handle.result()).phase == Phase.DONE
    output = (await handle.state()).calls.tool_calls.items[0].result.output
    assert output.startswith("exit code 0") and "OPENAI_API_KEY" not in output and "RATCHET_CODEC_KEYS" not in output


async def test_workflow_ids_that_clean_to_one_name_never_share_a_workspace(client, settings, worker):
    suffix = uuid.uuid4().hex[:6]
    write = [{"tool_calls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "team/x's"}}]}, {"content": "ok"}]
    read = [{"tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}}]}, {"content": "ok"}]
    first = await (await start(client, settings, scripted("saga", write), workflow_id=f"team/x-{suffix}")).result()
    second_handle = await start(client, settings, scripted("saga", read), workflow_id=f"team_x-{suffix}")
    second = await second_handle.result()
    assert first.phase == second.phase == Phase.DONE
    assert second.workspace == f"team_x-{suffix}" and first.workspace.startswith(f"team_x-{suffix}-")
    [call] = (await second_handle.state()).calls.tool_calls.items
    assert "team/x's" not in call.result.output and "no such file" in call.result.output.lower(), call.result.output


async def test_tool_parameters_reach_the_model_in_their_authors_order(client, settings, worker, openai_server):
    """write_file's `path` comes before its long `content`: a call cut off mid-content keeps the path."""
    key = os.environ["OPENAI_API_KEY"]
    openai_server.set_script([{"content": "ok"}], key=key)
    handle = await start(client, settings, {"agent": "coder", "objective": "x", "workspace": f"order-{uuid.uuid4().hex[:6]}"})
    await handle.result()
    [request] = openai_server.chat_requests(key=key)
    [write] = [t["function"] for t in request.json["tools"] if t["function"]["name"] == "write_file"]
    assert list(write["parameters"]["properties"]) == ["path", "content"]


async def test_the_operator_sets_the_model_calls_attempts(client, settings, openai_server):
    """RATCHET_MODEL_MAX_ATTEMPTS (or a profile's model_max_attempts): a model endpoint that keeps
    answering 503 fails the run after that many attempts, not the default 8."""
    from datetime import timedelta

    from ratchet.worker.main import build_worker

    key = os.environ["OPENAI_API_KEY"]
    openai_server.set_script([{"content": "a third attempt would get this answer"}], key=key)
    openai_server.enqueue_faults([{"status": 503}] * 2, key=key)
    two = settings.model_copy(update={"model_max_attempts": 2, "task_queue": f"attempts-{uuid.uuid4().hex[:8]}"})
    async with build_worker(client, two, graceful_shutdown_timeout=timedelta(0)):
        handle = await start(client, two, {"agent": "probe", "objective": "x"})
        with pytest.raises(RunFailed):
            await handle.result()
        plan = (await handle.state()).plan
    assert plan.model.max_attempts == 2 and await activity_attempts(handle, "model.call") == [2]
    assert openai_server.pending_faults(key=key) == 0
