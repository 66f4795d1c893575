"""`make test-real-model`'s check that no tool call is lost on the way: the recording proxy
(devtools/real_model/recorder.py) in front of the local Anthropic server streaming as llama-server
does, the anthropic provider through it, and the comparison of what the server sent with what a run
recorded."""

from __future__ import annotations

import dataclasses
import json

from devtools.real_model.__main__ import lost_tool_calls
from devtools.real_model.recorder import RecordingProxy
from ratchet.contracts import AgentState, Calls, Message, ModelSettings, ToolCallRecord, Window
from ratchet.models.anthropic import AnthropicProvider, AnthropicSettings
from ratchet.models.provider import ModelCall

WRITTEN = '{"path": "hello.txt", "content": "hello world}}'


class Deltas:
    def text(self, text: str) -> None:
        pass

    def tool_call(self, index: int, name: str = "", arguments: str = "") -> None:
        pass


def recorded(*calls: tuple[str, str]) -> AgentState:
    records = [ToolCallRecord.model_construct(step=1, tool=name, arguments=arguments) for name, arguments in calls]
    return AgentState.model_construct(calls=Calls(tool_calls=Window[ToolCallRecord](items=records)))


async def test_the_check_finds_a_tool_call_the_stream_lost_and_passes_what_was_sent(anthropic_server, anthropic_key):
    reply = {"content": "Writing.", "tool_calls": [{"name": "write_file", "arguments": WRITTEN}], "llama_server": True}
    anthropic_server.set_script([reply], key=anthropic_key)
    proxy = RecordingProxy(anthropic_server.port).start()
    try:
        model = AnthropicProvider(AnthropicSettings(base_url=proxy.base_url, api_key=anthropic_key))
        settings = ModelSettings(provider="anthropic", model="m", temperature=0)
        messages = [Message(role="user", content="write hello.txt")]
        call = ModelCall(key="wf/1/model", settings=settings, tools=[], messages=messages, turn=0, step=1)
        done = await model.complete(dataclasses.replace(call, deltas=Deltas()))
    finally:
        proxy.stop()
    [exchange] = proxy.exchanges
    assert exchange.streamed and exchange.status == 200
    assert exchange.tool_calls() == [("write_file", WRITTEN)]  # not valid JSON: as written
    [sent] = done.message.tool_calls
    assert lost_tool_calls(proxy.exchanges, recorded((sent.name, sent.arguments))) == []
    # what the SDK's `messages.stream` snapshot recorded (its partial-mode parse dropped the content)
    [lost] = lost_tool_calls(proxy.exchanges, recorded(("write_file", json.dumps({"path": "hello.txt"}))))
    assert lost.startswith("step 1: the server streamed tool calls") and "hello world}}" in lost
    assert lost_tool_calls(proxy.exchanges, recorded()) != []  # a call not recorded at all
