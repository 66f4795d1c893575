"""Typed final answers on the real dev server: an output schema (a registered pydantic model or a
JSON Schema) through each provider's own mechanism, an invalid answer sent back to the model within
the bad-call limit, the validated answer as `AgentResult.output` and, through ratchet.client, as the
model type."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from pydantic import BaseModel

from ratchet.client import RatchetClient, RunFailed
from ratchet.contracts import Phase
from ratchet.core.outputs import FINAL_ANSWER, register_output_type
from ratchet.worker.main import build_worker
from tests.runs import scripted, start


class TicketSummary(BaseModel):
    title: str
    priority: int


register_output_type(TicketSummary)

SCHEMA = {
    "type": "object",
    "properties": {"verdict": {"type": "string", "enum": ["pass", "fail"]}},
    "required": ["verdict"],
    "additionalProperties": False,
}


def answer(**arguments) -> dict:
    return {"tool_calls": [{"name": FINAL_ANSWER, "arguments": arguments}]}


async def test_a_scripted_answer_is_checked_sent_back_and_returned_as_the_model_type(client, settings, worker):
    script = [answer(title="printer on fire"), answer(title="printer on fire", priority=1)]
    run = RatchetClient(client, settings)
    handle = await run.start(scripted("probe", script, output_schema="TicketSummary"))
    assert await handle.output(TicketSummary) == TicketSummary(title="printer on fire", priority=1)
    state = await handle.state()
    assert state.calls.bad_tool_calls == 1
    refused = [m.content for m in state.conversation.messages.items if m.role == "user"][-1]
    assert refused.startswith("the final answer does not match the output schema: (the answer): 'priority' is a")
    result = await handle.result()
    assert result.output == {"title": "printer on fire", "priority": 1} and json.loads(result.answer) == result.output


async def test_answers_that_never_match_fail_the_run_at_the_bad_call_limit(client, settings, worker):
    script = [answer(verdict="maybe")] * 10
    handle = await start(client, settings, scripted("probe", script, output_schema=SCHEMA))
    with pytest.raises(RunFailed) as failure:
        await handle.result()
    assert "invalid tool calls or answers (limit 5); last: the final answer does not match" in failure.value.reason
    assert "verdict: 'maybe' is not one of ['pass', 'fail']" in failure.value.reason


async def test_the_anthropic_provider_offers_a_final_answer_tool(client, settings, anthropic_server, anthropic_key):
    anthropic_server.set_script([answer(verdict="pass")], key=anthropic_key)
    run = {"agent": "probe", "objective": "judge", "model": {"provider": "anthropic"}, "output_schema": SCHEMA}
    async with build_worker(client, settings, graceful_shutdown_timeout=timedelta(0)):
        result = await (await start(client, settings, run)).result()
    assert result.phase == Phase.DONE and result.output == {"verdict": "pass"}
    [request] = anthropic_server.requests_of(anthropic_key)
    [offered] = [t for t in request.json["tools"] if t["name"] == FINAL_ANSWER]
    assert offered["input_schema"] == SCHEMA


async def test_the_openai_provider_asks_for_strict_structured_output(client, settings, worker, openai_server, openai_key):
    openai_server.set_script([{"content": json.dumps({"verdict": "fail"})}], key=openai_key)
    result = await (await start(client, settings, {"agent": "probe", "objective": "judge", "output_schema": SCHEMA})).result()
    assert result.output == {"verdict": "fail"}
    [request] = openai_server.chat_requests(key=openai_key)
    assert request.json["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "output", "schema": SCHEMA, "strict": True},
    }


async def test_a_bad_output_schema_fails_the_run_at_once_naming_the_field(client, settings, worker):
    cases = [
        ({"type": "object", "properties": {"x": {"type": "strin"}}}, "output_schema: not a valid JSON Schema: 'strin'"),
        ({"type": "array"}, "output_schema: the schema's top level must be an object"),
        ("NoSuchType", "output_schema: no output type 'NoSuchType' is registered on this worker (it has: "),
    ]
    for schema, says in cases:
        handle = await start(client, settings, scripted("probe", [{"content": "x"}], output_schema=schema))
        with pytest.raises(RunFailed) as failure:
            await handle.result()
        assert says in failure.value.reason, failure.value.reason
    assert (await handle.state()).phase == Phase.FAILED
