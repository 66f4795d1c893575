"""The openai provider's streaming path against the local OpenAI-compatible server: the chunks, the
usage chunk, and the reply assembled exactly as the non-streaming call returns it; a stream cut
mid-way, a 429 before the first chunk and a 500 after some chunks are retryable failures."""

from __future__ import annotations

from datetime import timedelta

import pytest
from temporalio.exceptions import ApplicationError

from ratchet.contracts import Message, ModelSettings
from ratchet.models.openai import OpenAIProvider, OpenAISettings
from ratchet.models.provider import ModelCall
from ratchet.testing.openai_server import OpenAIServer

SCRIPT = [
    {"content": "Let me look at the file first.", "tool_calls": [{"name": "read_file", "arguments": {"path": "src/a.py"}}]},
    {"content": "The bug was an off-by-one in the loop; fixed and the tests pass."},
]


class Collected:
    def __init__(self) -> None:
        self.texts: list[str] = []
        self.calls: list[tuple[int, str, str]] = []

    def text(self, text: str) -> None:
        self.texts.append(text)

    def tool_call(self, index: int, name: str = "", arguments: str = "") -> None:
        self.calls.append((index, name, arguments))


@pytest.fixture
def server():
    with OpenAIServer(replies=SCRIPT) as srv:
        yield srv


def provider(server: OpenAIServer) -> OpenAIProvider:
    return OpenAIProvider(OpenAISettings(base_url=server.base_url, api_key="k"))


def call(turn: int, deltas: Collected | None) -> ModelCall:
    messages = [Message(role="user", content="fix the bug")]
    if turn:
        messages.append(Message(role="assistant", content="x", tool_calls=[]))
    return ModelCall(
        key="run-1/1/model",
        settings=ModelSettings(provider="openai", model="ratchet-test"),
        tools=[],
        messages=messages,
        turn=turn,
        step=1,
        deltas=deltas,
    )


@pytest.mark.parametrize("turn", [0, 1])
async def test_a_streamed_reply_is_the_reply_without_streaming(server, turn):
    openai = provider(server)
    plain = await openai.complete(call(turn, None))
    deltas = Collected()
    streamed = await openai.complete(call(turn, deltas))
    assert streamed == plain  # message, usage (from the usage chunk), finish reason, model
    assert streamed.usage.completion_tokens > 0
    request = server.chat_requests()[-1].json
    assert request["stream"] is True and request["stream_options"] == {"include_usage": True}
    assert len(deltas.texts) > 1 and "".join(deltas.texts) == plain.message.content
    for index, tool in enumerate(plain.message.tool_calls):
        parts = [c for c in deltas.calls if c[0] == index]
        assert "".join(name for _, name, _ in parts) == tool.name
        assert "".join(arguments for _, _, arguments in parts) == tool.arguments
        assert len(parts) > 2


@pytest.mark.parametrize(
    "fault, kind", [({"cut_after": 3}, "ModelStreamCut"), ({"error_after": 3}, "ModelError")]
)
async def test_a_stream_that_breaks_mid_way_is_retried(server, fault, kind):
    server.enqueue_faults([fault])
    deltas = Collected()
    with pytest.raises(ApplicationError) as raised:
        await provider(server).complete(call(0, deltas))
    assert raised.value.type == kind and not raised.value.non_retryable
    assert deltas.texts, "some text arrived before the break"
    # the retry (Temporal's) gets the whole reply
    again = Collected()
    reply = await provider(server).complete(call(0, again))
    assert "".join(again.texts) == reply.message.content == SCRIPT[0]["content"]


async def test_a_429_before_the_first_chunk_is_retried_after_its_retry_after(server):
    server.enqueue_faults([{"status": 429, "retry_after": 2}])
    deltas = Collected()
    with pytest.raises(ApplicationError) as raised:
        await provider(server).complete(call(0, deltas))
    assert raised.value.type == "ModelHTTP429" and not raised.value.non_retryable
    assert raised.value.next_retry_delay == timedelta(seconds=2)
    assert deltas.texts == [] and deltas.calls == []
