"""The anthropic provider through the real anthropic SDK against the strict local server
(ratchet.testing.anthropic_server), and the coder agent on it end to end on the dev server."""

from __future__ import annotations

import dataclasses
import json
import shutil
from datetime import timedelta

import anthropic
import pytest
from temporalio.exceptions import ApplicationError

from devtools.demo import FIXED_CALC, SAMPLE, demo_script
from ratchet.client import LiveText, RunFailed
from ratchet.contracts import Message, ModelSettings, OutputSpec, Phase, ToolCallRequest, ToolSchema, Usage
from ratchet.core import budget
from ratchet.models.anthropic import AnthropicProvider, AnthropicSettings
from ratchet.models.provider import ModelCall
from ratchet.worker.main import build_worker
from tests.runs import start

TOOLS = [ToolSchema(name="read_file", description="Read a file.", parameters={"type": "object", "properties": {"path": {"type": "string"}}})]


def provider(server, key: str) -> AnthropicProvider:
    return AnthropicProvider(AnthropicSettings(base_url=server.base_url, api_key=key))


def call(messages: list[Message], **settings) -> ModelCall:
    model = ModelSettings(provider="anthropic", model="claude-test", **settings)
    return ModelCall(key="wf/1/model", settings=model, tools=TOOLS, messages=messages, turn=0, step=1)


CONVERSATION = [
    Message(role="system", content="You are careful."),
    Message(role="user", content="read two files"),
    Message(
        role="assistant",
        content="",
        tool_calls=[
            ToolCallRequest(id="call_0_0", name="read_file", arguments='{"path": "a"}'),
            ToolCallRequest(id="call_0_1", name="read_file", arguments='{"path": "b"'),
        ],
    ),
    Message(role="tool", tool_call_id="call_0_0", content="contents of a"),
    Message(role="tool", tool_call_id="call_0_1", content="ERROR: invalid JSON", is_error=True),
    Message(role="user", content="also: hurry"),
]


async def test_a_conversation_is_rendered_as_the_api_requires(anthropic_server, anthropic_key):
    """Parallel tool use answered in one user turn (results first, the error marked), the system
    prompt as `system`, bad past arguments wrapped, caching on tools, system and the last block."""
    anthropic_server.set_script([{}, {"content": "both read"}], key=anthropic_key)
    done = await provider(anthropic_server, anthropic_key).complete(call(CONVERSATION))
    assert done.message.content == "both read" and done.finish_reason is None
    [sent] = anthropic_server.requests_of(anthropic_key)
    assert sent.status == 200, sent.error
    body = sent.json
    assert body["system"] == [{"type": "text", "text": "You are careful.", "cache_control": {"type": "ephemeral"}}]
    assert body["tools"][0]["cache_control"] == {"type": "ephemeral"}
    assistant, results = body["messages"][1], body["messages"][2]
    assert [b["type"] for b in assistant["content"]] == ["tool_use", "tool_use"]
    assert assistant["content"][1]["input"] == {"invalid_json_arguments": '{"path": "b"'}
    assert [b["type"] for b in results["content"]] == ["tool_result", "tool_result", "text"]
    assert results["content"][1]["is_error"] is True and "is_error" not in results["content"][0]
    assert results["content"][-1]["cache_control"] == {"type": "ephemeral"}


async def test_caching_makes_the_next_steps_prefix_a_cache_read_counted_apart(anthropic_server, anthropic_key):
    anthropic_server.set_script([{"content": "one"}, {"content": "two"}], key=anthropic_key)
    model = provider(anthropic_server, anthropic_key)
    first = await model.complete(call(CONVERSATION[:2]))
    step = [*CONVERSATION[:2], first.message, Message(role="user", content="and now?")]
    second = await model.complete(call(step))
    assert first.usage.cache_read_tokens == 0 and first.usage.cache_write_tokens > 0
    assert second.usage.cache_read_tokens >= first.usage.cache_write_tokens
    assert second.usage.prompt_tokens == second.usage.cache_read_tokens + second.usage.cache_write_tokens  # all marked
    off = await model.complete(call(step, options={"prompt_caching": False}))
    assert off.usage.cache_read_tokens == off.usage.cache_write_tokens == 0
    assert "cache_control" not in str(anthropic_server.requests_of(anthropic_key)[-1].json)


@pytest.mark.parametrize(
    ("fault", "retryable", "says"),
    [
        ({"status": 429, "retry_after": 7}, True, "answered 429: rate_limit_error"),
        ({"status": 529}, True, "overloaded 529: overloaded_error"),
        ({"status": 500}, True, "answered 500: api_error"),
        ({"status": 401}, False, "check ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN) on the worker"),
        ({"status": 404}, False, "no such model or endpoint"),
    ],
)
async def test_errors_are_retryable_or_not_on_purpose(anthropic_server, anthropic_key, fault, retryable, says):
    anthropic_server.enqueue_faults([fault], key=anthropic_key)
    with pytest.raises(ApplicationError) as failure:
        await provider(anthropic_server, anthropic_key).complete(call(CONVERSATION[:2]))
    assert failure.value.non_retryable is not retryable and says in failure.value.message, failure.value.message
    if "retry_after" in fault:
        assert failure.value.next_retry_delay == timedelta(seconds=7)
    assert len(anthropic_server.requests_of(anthropic_key)) == 1, "the SDK's own retries are off"


async def test_a_reply_cut_at_max_tokens_is_cut_off_and_a_refusal_fails_for_good(anthropic_server, anthropic_key):
    anthropic_server.set_script([{"content": "x" * 400}], key=anthropic_key)
    cut = await provider(anthropic_server, anthropic_key).complete(call(CONVERSATION[:2], max_output_tokens=10))
    assert cut.finish_reason == "length" and len(cut.message.content) == 40
    anthropic_server.set_script([{"stop_reason": "refusal"}], key=anthropic_key)
    with pytest.raises(ApplicationError, match="refused") as failure:
        await provider(anthropic_server, anthropic_key).complete(call(CONVERSATION[:2]))
    assert failure.value.non_retryable


async def test_the_server_refuses_what_the_api_refuses(anthropic_server, anthropic_key):
    client = anthropic.AsyncAnthropic(api_key=anthropic_key, base_url=anthropic_server.base_url, max_retries=0)
    tool_use = {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "read_file", "input": {}}]}
    cases = [
        ([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}], "roles must alternate"),
        ([{"role": "user", "content": "a"}, tool_use, {"role": "user", "content": "no result"}], "must each be answered"),
        ([{"role": "user", "content": [{"type": "text", "text": " "}]}], "non-whitespace text"),
        ([{"role": "user", "content": [{"type": "txt", "text": "a"}]}], "TextBlockParam.type: Input should be 'text'"),
    ]
    for messages, says in cases:
        with pytest.raises(anthropic.BadRequestError, match=says):
            await client.messages.create(model="m", max_tokens=10, messages=messages)


async def test_the_server_refuses_a_field_the_api_does_not_take(anthropic_server, anthropic_key):
    """As the API does: a test server that accepts anything hid a provider bug only llama-server showed."""
    client = anthropic.AsyncAnthropic(api_key=anthropic_key, base_url=anthropic_server.base_url, max_retries=0)
    messages = [{"role": "user", "content": "a"}]
    with pytest.raises(anthropic.BadRequestError, match="temprature: Extra inputs are not permitted"):
        await client.messages.create(model="m", max_tokens=10, messages=messages, extra_body={"temprature": 0})
    with pytest.raises(anthropic.BadRequestError, match="temperature: must be a number between 0 and 1"):
        await client.messages.create(model="m", max_tokens=10, messages=messages, extra_body={"temperature": "0"})


@pytest.mark.parametrize("streaming", [False, True])
async def test_sampling_settings_reach_the_api_whatever_the_sdk_names(anthropic_server, anthropic_key, streaming):
    """anthropic 2.x has no `temperature` keyword (a run at temperature 0 failed at step 1): the
    provider passes the SDK only what its method names and the rest in `extra_body`."""
    anthropic_server.set_script([{"content": "cold"}, {"content": "capped"}], key=anthropic_key)
    model = provider(anthropic_server, anthropic_key)
    deltas = Collected() if streaming else None
    made = dataclasses.replace(call(CONVERSATION[:2], temperature=0), deltas=deltas)
    assert (await model.complete(made)).message.content == "cold"
    capped = dataclasses.replace(call(CONVERSATION[:2], temperature=1.5), deltas=deltas)
    await model.complete(capped)
    first, second = anthropic_server.requests_of(anthropic_key)
    assert (first.status, second.status) == (200, 200), (first.error, second.error)
    assert (first.json["temperature"], second.json["temperature"]) == (0, 1.0)
    assert bool(first.json.get("stream")) is streaming


async def test_the_server_streams_as_the_api_does(anthropic_server, anthropic_key):
    anthropic_server.set_script([{"tool_calls": [{"name": "read_file", "arguments": {"path": "a"}}]}], key=anthropic_key)
    client = anthropic.AsyncAnthropic(api_key=anthropic_key, base_url=anthropic_server.base_url, max_retries=0)
    async with client.messages.stream(model="m", max_tokens=100, messages=[{"role": "user", "content": "go"}]) as stream:
        final = await stream.get_final_message()
    assert final.stop_reason == "tool_use" and final.content[0].input == {"path": "a"}


class Collected:
    """What a provider hands a streaming call's `deltas`."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.calls: dict[int, list[str]] = {}

    def text(self, text: str) -> None:
        self.texts.append(text)

    def tool_call(self, index: int, name: str = "", arguments: str = "") -> None:
        self.calls.setdefault(index, []).append(f"{name}|{arguments}")


def streamed(messages: list[Message], deltas: Collected, **settings) -> ModelCall:
    return dataclasses.replace(call(messages, **settings), deltas=deltas)


async def test_a_streamed_reply_is_the_reply_a_call_without_streaming_gets(anthropic_server, anthropic_key):
    reply = {"content": "Reading both files now, then I will answer.",
             "tool_calls": [{"name": "read_file", "arguments": {"path": "a"}},
                            {"name": "read_file", "arguments": {"path": "b/ü"}}]}
    anthropic_server.set_script([reply], key=anthropic_key)
    plain = await provider(anthropic_server, anthropic_key).complete(call(CONVERSATION[:2]))
    deltas = Collected()
    anthropic_server.set_script([reply], key=anthropic_key)
    live = await provider(anthropic_server, anthropic_key).complete(streamed(CONVERSATION[:2], deltas))
    assert dataclasses.replace(live, usage=plain.usage) == plain  # the same message, finish reason and model
    # the same tokens (the second request's prefix is read from the simulated cache the first wrote)
    assert (live.usage.prompt_tokens, live.usage.completion_tokens) == (plain.usage.prompt_tokens, plain.usage.completion_tokens)
    first, second = anthropic_server.requests_of(anthropic_key)
    assert second.json.get("stream") is True and not first.json.get("stream")
    assert len(deltas.texts) > 3 and "".join(deltas.texts) == plain.message.content  # in pieces, as written
    assert deltas.calls == {i: [f"read_file|{c.arguments}"] for i, c in enumerate(plain.message.tool_calls)}


WRITE_HELLO = {"name": "write_file", "arguments": {"path": "hello.txt", "content": "hello world"}}


async def test_tool_calls_streamed_as_llama_server_streams_them_are_the_reply_without_streaming(
    anthropic_server, anthropic_key
):
    """llama-server's /v1/messages: tool_use blocks start without `input`, their JSON comes a token
    at a time, each block's start is sent again before its last piece, every stop comes at the end.
    The SDK's `messages.stream` snapshot made the repeated start a second tool call with no input."""
    reply = {"content": "Writing it.", "tool_calls": [WRITE_HELLO, {"name": "read_file", "arguments": {"path": "hello.txt"}}]}
    anthropic_server.set_script([reply], key=anthropic_key)
    plain = await provider(anthropic_server, anthropic_key).complete(call(CONVERSATION[:2]))
    anthropic_server.set_script([{**reply, "llama_server": True}], key=anthropic_key)
    deltas = Collected()
    live = await provider(anthropic_server, anthropic_key).complete(streamed(CONVERSATION[:2], deltas))
    assert [(c.name, json.loads(c.arguments)) for c in live.message.tool_calls] == [
        ("write_file", {"path": "hello.txt", "content": "hello world"}), ("read_file", {"path": "hello.txt"})]
    assert dataclasses.replace(live, usage=plain.usage) == plain
    assert deltas.calls == {i: [f"{c.name}|{c.arguments}"] for i, c in enumerate(plain.message.tool_calls)}
    assert anthropic_server.requests_of(anthropic_key)[-1].json["stream"] is True


async def test_tool_json_that_is_not_valid_is_recorded_as_the_model_wrote_it(anthropic_server, anthropic_key):
    """A small model's `{"path": ..., "content": "hello world}}`: the SDK's partial-mode parse made it
    `{"path": "hello.txt"}` (a write_file without content, failing at every step); recorded as written,
    the run tells the model its arguments were not valid JSON."""
    written = '{"path": "hello.txt", "content": "hello world}}'
    reply = {"tool_calls": [{"name": "write_file", "arguments": written}], "llama_server": True}
    anthropic_server.set_script([reply], key=anthropic_key)
    deltas = Collected()
    done = await provider(anthropic_server, anthropic_key).complete(streamed(CONVERSATION[:2], deltas))
    [recorded] = done.message.tool_calls
    assert (recorded.name, recorded.arguments) == ("write_file", written)
    assert deltas.calls == {0: [f"write_file|{written}"]}


async def test_a_paused_turn_streams_its_continuation_after_the_first_part(anthropic_server, anthropic_key):
    anthropic_server.set_script(
        [{"content": "half, ", "stop_reason": "pause_turn"}, {"content": "whole", "tool_calls": [
            {"name": "read_file", "arguments": {"path": "c"}}]}],
        key=anthropic_key,
    )
    deltas = Collected()
    done = await provider(anthropic_server, anthropic_key).complete(streamed(CONVERSATION[:2], deltas))
    assert done.message.content == "half, whole" == "".join(deltas.texts)
    assert deltas.calls == {0: ['read_file|{"path": "c"}']}


@pytest.mark.parametrize(
    ("fault", "says"),
    [({"cut_after": 4}, "stream ended before the reply finished"), ({"error_after": 4}, "overloaded_error")],
)
async def test_a_stream_cut_or_broken_mid_way_is_retried(anthropic_server, anthropic_key, fault, says):
    anthropic_server.set_script([{"content": "a long answer written in many pieces"}], key=anthropic_key)
    anthropic_server.enqueue_faults([fault], key=anthropic_key)
    deltas = Collected()
    with pytest.raises(ApplicationError) as failure:
        await provider(anthropic_server, anthropic_key).complete(streamed(CONVERSATION[:2], deltas))
    assert not failure.value.non_retryable and says in failure.value.message, failure.value.message
    assert deltas.texts and "".join(deltas.texts) != "a long answer written in many pieces"  # it stopped part way


async def test_a_call_with_an_output_schema_does_not_stream(anthropic_server, anthropic_key):
    anthropic_server.set_script([{"tool_calls": [{"name": "final_answer", "arguments": {"n": 1}}]}], key=anthropic_key)
    output = OutputSpec(name="Count", json_schema={"type": "object", "properties": {"n": {"type": "integer"}}})
    deltas = Collected()
    done = await provider(anthropic_server, anthropic_key).complete(
        dataclasses.replace(streamed(CONVERSATION[:2], deltas), output=output)
    )
    assert json.loads(done.message.content) == {"n": 1} and not deltas.texts and not deltas.calls
    [request] = anthropic_server.requests_of(anthropic_key)
    assert not request.json.get("stream")


async def test_the_coder_agent_runs_on_anthropic_end_to_end(client, settings, anthropic_server, anthropic_key):
    shutil.copytree(SAMPLE, settings.workspace_root / "calc")
    anthropic_server.set_script(demo_script(), key=anthropic_key)
    run = {"agent": "coder", "objective": "fix it", "workspace": "calc", "model": {"provider": "anthropic"}}
    async with build_worker(client, settings, graceful_shutdown_timeout=timedelta(0)):
        handle = await start(client, settings, run)
        result = await handle.result()
        state = await handle.state()
        events = [e async for e in handle.stream()]
    assert result.phase == Phase.DONE, result.last_error
    shown = LiveText()
    text = "".join(shown.feed(e) or "" for e in events)
    assert result.answer and result.answer in text  # the replies streamed, through the run's stream
    assert all(r.json.get("stream") for r in anthropic_server.requests_of(anthropic_key))
    assert (settings.workspace_root / "calc" / "calc.py").read_text() == FIXED_CALC
    assert [c.id for c in state.effects.checkpoints.items] == ["cp-1"] and state.effects.rollbacks[0].clean
    requests = anthropic_server.requests_of(anthropic_key)
    assert [r.status for r in requests] == [200] * 5, [r.error for r in requests]
    assert {r.json["model"] for r in requests} == {"claude-sonnet-4-5"}
    assert result.used.cache_read_tokens > 0 and result.used.cache_write_tokens > 0


HELLO_TEST = """import unittest
from pathlib import Path


class HelloTest(unittest.TestCase):
    def test_hello(self):
        self.assertEqual(Path("hello.txt").read_text(), "hello world")
"""


async def test_a_coder_run_streamed_as_llama_server_streams_writes_the_file(client, settings, anthropic_server, anthropic_key):
    """Through the workflow: arguments that are not valid JSON reach the model as such (not as a
    write_file without content), the next call writes the file, and every tool call streamed is
    the one the run recorded."""
    (settings.workspace_root / "hello").mkdir(parents=True)
    (settings.workspace_root / "hello" / "test_hello.py").write_text(HELLO_TEST)
    broken = '{"path": "hello.txt", "content": "hello world}}'
    anthropic_server.set_script([
        {"tool_calls": [{"name": "write_file", "arguments": broken}], "llama_server": True},
        {"content": "Again.", "tool_calls": [WRITE_HELLO], "llama_server": True},
        {"content": "I wrote hello.txt.", "llama_server": True},
    ], key=anthropic_key)
    run = {"agent": "coder", "objective": "write hello.txt", "workspace": "hello",
           "model": {"provider": "anthropic", "temperature": 0}}
    async with build_worker(client, settings, graceful_shutdown_timeout=timedelta(0)):
        handle = await start(client, settings, run)
        result = await handle.result()
        state = await handle.state()
    assert result.phase == Phase.DONE, result.last_error
    replies = [m for m in state.conversation.messages.items if m.role == "assistant"]
    assert [c.arguments for c in replies[0].tool_calls] == [broken]  # as the model wrote it
    told = next(m.content for m in state.conversation.messages.items if m.role == "tool")
    assert "tool arguments are not valid JSON" in told and state.calls.bad_tool_calls == 1, told
    [written] = state.calls.tool_calls.items
    assert written.result.ok and json.loads(written.arguments) == WRITE_HELLO["arguments"]
    assert (settings.workspace_root / "hello" / "hello.txt").read_text() == "hello world"
    assert [c.verified for c in state.effects.checkpoints.items] == [True]
    requests = anthropic_server.requests_of(anthropic_key)
    assert [(r.status, r.json.get("stream"), r.json.get("temperature")) for r in requests] == [(200, True, 0)] * 3


async def test_a_worker_without_the_key_fails_anthropic_runs_naming_the_variable(client, settings, worker):
    with pytest.raises(RunFailed) as failure:
        await (await start(client, settings, {"agent": "probe", "objective": "o", "model": {"provider": "anthropic"}})).result()
    assert "set ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN) on the worker" in failure.value.reason


def test_cache_reads_and_writes_are_priced_apart():
    prices = dict(usd_per_1k_prompt_tokens=3.0, usd_per_1k_completion_tokens=15.0)
    settings = ModelSettings(provider="anthropic", model="m", **prices, usd_per_1k_cache_read_tokens=0.3,
                             usd_per_1k_cache_write_tokens=3.75)
    usage = Usage(prompt_tokens=3500, completion_tokens=100, cache_read_tokens=2000, cache_write_tokens=500)
    assert budget.cost(usage, settings) == pytest.approx((1000 * 3 + 2000 * 0.3 + 500 * 3.75 + 100 * 15) / 1000)
    assert budget.cost(usage, ModelSettings(provider="openai", model="m", **prices)) == pytest.approx(3.5 * 3 + 1.5)


async def test_a_paused_turn_is_continued_within_the_call(anthropic_server, anthropic_key):
    anthropic_server.set_script([{}, {"content": "half, ", "stop_reason": "pause_turn"}, {"content": "whole"}],
                                key=anthropic_key)
    done = await provider(anthropic_server, anthropic_key).complete(call(CONVERSATION))
    assert done.message.content == "half, whole"
    first, second = anthropic_server.requests_of(anthropic_key)
    assert second.status == 200 and second.json["messages"][-1]["role"] == "assistant"
