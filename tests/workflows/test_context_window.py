"""`context_messages`: a long run sends the model its system prompt, its objective and only the
latest messages; the transcript still keeps every message."""

from __future__ import annotations

import os

from ratchet.contracts import Phase
from ratchet.stores import transcripts
from ratchet.stores.artifacts import DirectoryArtifactStore
from tests.runs import scripted, start

STEPS = 8


def steps(n: int) -> list[dict]:
    return [{"tool_calls": [{"name": "probe_append", "arguments": {"label": f"s{i}"}}]} for i in range(n)]


async def test_the_model_sees_the_start_and_the_latest_messages_only(client, settings, worker, openai_server):
    key = os.environ["OPENAI_API_KEY"]
    openai_server.set_script(steps(STEPS) + [{"content": "windowed done"}], key=key)
    run = {"agent": "probe", "objective": "append eight labels", "workspace": "win", "model": {"context_messages": 4}}
    handle = await start(client, settings, run)
    assert (await handle.result()).answer == "windowed done"
    sent = [r.json["messages"] for r in openai_server.chat_requests(key=key)]
    assert len(sent) == STEPS + 1
    for messages in sent:
        assert [m["role"] for m in messages[:2]] == ["system", "user"] and messages[1]["content"] == "append eight labels"
        assert len(messages) <= 2 + 4 + 1, "head, the window, and the new tool result"
        assert len(messages) <= 2 or messages[2]["role"] != "tool", "no result without its call"
    assert "s7" in str(sent[-1][-2:]) and "s0" not in str(sent[-1])
    state = await handle.state()
    everything = transcripts.read_all(DirectoryArtifactStore(settings.artifact_dir), state.conversation.transcript)
    assert len(everything) == state.conversation.count == 2 + 2 * STEPS + 1


async def test_a_scripted_run_with_a_window_still_follows_its_script(client, settings, worker):
    """The scripted provider picks its reply by the turns in the whole conversation, not the window."""
    run = scripted("probe", steps(STEPS) + [{"content": "scripted done"}], workspace="win2")
    run["model"]["context_messages"] = 3
    handle = await start(client, settings, run)
    result = await handle.result()
    assert result.phase == Phase.DONE and result.answer == "scripted done" and result.used.steps == STEPS + 1
    labels = [line.split()[-1] for line in (settings.workspace_root / "win2" / "probe.log").read_text().splitlines()
              if line.startswith("done ")]
    assert labels == [f"s{i}" for i in range(STEPS)]
