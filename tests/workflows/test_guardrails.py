"""Guardrails with tripwires (issue #43, item 4), on the dev server with the scripted model: checks
on the input, on a tool call's arguments and on the final answer, each stopping the run, asking a
person or redacting and going on; every trip recorded in `state.guardrails` (profile `guarded`,
tests/plugins/probe.py)."""

from __future__ import annotations

import pytest

from ratchet.client import RunFailed
from ratchet.contracts import Phase
from ratchet.contracts.events import Withdrawn
from tests.runs import call, runs, scripted, start, wait_for

KEY = "AKIA" + "ABCDEFGHIJKLMNOP"


def trips(state) -> list[tuple[str, str, str, list[str]]]:
    return [(t.guardrail, t.where, t.action, t.found) for t in state.guardrails]


async def test_input_is_redacted_before_the_model_sees_it(client, settings, worker):
    run = await start(client, settings, scripted("guarded", [{"content": "noted"}], objective="mail ana@example.com"))
    assert (await run.result()).phase == Phase.DONE
    page = await run.transcript(0, 10)
    [objective] = [m.content for m in page.messages if m.role == "user"]
    assert objective == "mail [redacted: pii-in]"
    assert (await run.state()).run.objective == "mail [redacted: pii-in]"
    assert trips(await run.state()) == [("pii-in", "objective", "redact", ["email"])]


async def test_a_sessions_turns_are_redacted_before_the_model_sees_them(client, settings, worker):
    script = [{"content": "one"}, {"content": "two"}]
    run = await start(client, settings, scripted("guarded_chatter", script, objective="hi, I am ana@example.com"))
    await wait_for(run, lambda s: s.phase == Phase.AWAITING_MESSAGE)
    assert (await run.ask("mail bo@example.com")).answer == "two"
    state = await run.state()
    assert [t.question for t in state.session.turns.items] == [
        "hi, I am [redacted: pii-in]",
        "mail [redacted: pii-in]",
    ]
    page = await run.transcript(0, 10)
    assert [m.content for m in page.messages if m.role == "user"] == [t.question for t in state.session.turns.items]
    assert [t.where for t in state.guardrails] == ["objective", "message 3"]


async def test_a_tool_call_that_trips_a_stop_guardrail_never_runs_and_the_run_fails_saying_why(
    client, settings, worker
):
    script = [{"tool_calls": [call("write_file", path="x.sql", content="DROP TABLE users;")]}, {"content": "dropped"}]
    run = await start(client, settings, scripted("guarded", script, workspace="guard-stop"))
    with pytest.raises(RunFailed) as failed:
        await run.result()
    assert "guardrail no-drop tripped on write_file call_1_0 (content): pattern 'DROP TABLE'" in failed.value.reason
    state = await run.state()
    assert state.phase == Phase.FAILED and trips(state) == [
        ("no-drop", "write_file call_1_0 (content)", "stop", ["pattern 'DROP TABLE'"])
    ]
    assert not (settings.workspace_root / "guard-stop" / "x.sql").exists()
    description = await run.describe()
    assert description.status.name == "FAILED"


async def test_an_ask_guardrail_makes_the_call_wait_for_a_person(client, settings, worker):
    script = [{"tool_calls": [call("create_ticket", title="Customer refund")]}, {"content": "opened"}]
    run = await start(client, settings, scripted("guarded", script))
    state = await wait_for(run, lambda s: s.phase == Phase.AWAITING_APPROVAL)
    [pending] = state.calls.pending_approvals
    assert pending.reason == "guardrail customer-tickets: pattern '(?i)customer' in title"
    await run.approve(pending.call_id)
    assert (await run.result()).phase == Phase.DONE
    assert trips(await run.state()) == [
        ("customer-tickets", "create_ticket call_1_0 (title)", "ask", ["pattern '(?i)customer'"])
    ]


async def test_redacted_arguments_and_answers_go_on_and_the_streamed_answer_is_withdrawn(client, settings, worker):
    script = [
        {"tool_calls": [call("write_file", path="env.txt", content=f"key={KEY}\n")]},
        {"content": f"wrote the key {KEY} to env.txt"},
    ]
    run = await start(client, settings, scripted("guarded", script, workspace="guard-redact"))
    result = await run.result()
    assert result.phase == Phase.DONE and result.answer == "wrote the key [redacted: no-keys-out] to env.txt"
    assert (settings.workspace_root / "guard-redact" / "env.txt").read_text() == "key=[redacted: no-keys-in-files]\n"
    state = await run.state()
    assert [t[0] for t in trips(state)] == ["no-keys-in-files", "no-keys-out"]
    [record] = state.calls.tool_calls.items
    assert KEY not in record.arguments
    withdrawn = [e async for e in runs(client, settings).get(run.workflow_id).stream() if isinstance(e, Withdrawn)]
    assert [(w.guardrail, w.action) for w in withdrawn] == [("no-keys-out", "redact")]


async def test_strings_nested_in_a_calls_arguments_are_checked_too(client, settings, worker):
    notes = [{"path": "a.txt", "text": "nothing here"}, {"path": "b.txt", "text": f"key={KEY}"}]
    script = [{"tool_calls": [call("probe_notes", notes=notes)]}, {"content": "noted"}]
    run = await start(client, settings, scripted("guarded", script))
    assert (await run.result()).phase == Phase.DONE
    state = await run.state()
    assert trips(state) == [("no-keys-in-notes", "probe_notes call_1_0 (notes[1].text)", "redact", ["secret"])]
    [record] = state.calls.tool_calls.items
    assert KEY not in record.arguments and "[redacted: no-keys-in-notes]" in record.arguments
    assert record.result.output == "a.txt: nothing here\nb.txt: key=[redacted: no-keys-in-notes]"


async def test_an_answer_that_trips_a_stop_guardrail_is_not_the_runs_answer(client, settings, worker):
    run = await start(client, settings, scripted("guarded", [{"content": "the CONFIDENTIAL plan"}]))
    with pytest.raises(RunFailed, match="guardrail no-confidential-out tripped on answer"):
        await run.result()
    state = await run.state()
    assert state.answer is None and trips(state) == [
        ("no-confidential-out", "answer", "stop", ["pattern 'CONFIDENTIAL'"])
    ]


def test_a_guardrail_that_cannot_work_is_refused_where_the_profile_is_made():
    from pydantic import ValidationError

    from ratchet.contracts import Guardrail

    for fields, says in [
        ({"name": "g", "on": "answer", "patterns": ["("]}, "does not compile"),
        ({"name": "g", "on": "answer"}, "give patterns, detectors, a json_schema or a judge"),
        ({"name": "g", "on": "answer", "patterns": ["x"], "action": "ask"}, "`ask` is for tool calls"),
        ({"name": "g", "on": "input", "patterns": ["x"], "tool": "write_file"}, "for `on: tool_call`"),
        ({"name": "g", "on": "answer", "detectors": ["ssn"]}, "detectors"),
    ]:
        with pytest.raises(ValidationError, match=says):
            Guardrail.model_validate(fields)


async def test_json_schema_guardrails_ask_about_a_call_and_stop_a_wrong_answer(client, settings, worker):
    script = [
        {"tool_calls": [call("create_ticket", title="a title far longer than twenty characters")]},
        {"content": '{"status": "opened"}'},
    ]
    run = await start(client, settings, scripted("schema_guarded", script))
    state = await wait_for(run, lambda s: s.phase == Phase.AWAITING_APPROVAL)
    [pending] = state.calls.pending_approvals
    assert pending.reason.startswith("guardrail short-titles: schema: title: ")
    await run.approve(pending.call_id)
    result = await run.result()
    assert result.phase == Phase.DONE and result.answer == '{"status": "opened"}'

    wrong = await start(client, settings, scripted("schema_guarded", [{"content": "opened it"}]))
    with pytest.raises(RunFailed, match="guardrail json-answer tripped on answer: schema: the answer is not JSON"):
        await wrong.result()
    broken = await start(client, settings, scripted("bad_schema", [{"content": "{}"}]))
    with pytest.raises(RunFailed, match="guardrail 'broken': json_schema does not compile"):
        await broken.result()


def test_a_json_schema_guardrail_checks_calls_and_answers_only_and_is_never_redacted():
    from pydantic import ValidationError

    from ratchet.contracts import Guardrail

    with pytest.raises(ValidationError, match="not the input"):
        Guardrail(name="g", on="input", json_schema={"type": "string"})
    with pytest.raises(ValidationError, match="finds no text to redact"):
        Guardrail(name="g", on="answer", json_schema={"type": "object"}, action="redact")


async def test_judge_guardrails_ask_about_a_call_and_stop_an_answer_their_cost_charged(client, settings, worker):
    script = [{"tool_calls": [call("create_ticket", title="refund for ACME")]}, {"content": "we will refund you"}]
    run = await start(client, settings, scripted("judged", script))
    state = await wait_for(run, lambda s: s.phase == Phase.AWAITING_APPROVAL)
    [pending] = state.calls.pending_approvals
    assert pending.reason == "guardrail ticket-review: judge: FAIL: the title names a customer"
    before = state.used.prompt_tokens
    await run.approve(pending.call_id)
    with pytest.raises(RunFailed, match="guardrail no-refunds tripped on answer: judge: FAIL: it promises a refund"):
        await run.result()
    state = await run.state()
    assert [t.guardrail for t in state.guardrails] == ["ticket-review", "no-refunds"]
    assert before > 0 and state.used.prompt_tokens > before  # the judges' calls are charged to the run

    passing = await start(client, settings, scripted("judged_pass", script))
    result = await passing.result()
    assert result.phase == Phase.DONE and result.answer == "we will refund you"
    assert (await passing.state()).guardrails == []
