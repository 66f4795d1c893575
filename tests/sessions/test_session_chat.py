"""`ratchet chat` through a pseudo-terminal (#24 item 9): a session rejoined by its id, a turn whose
answer streams, a tool call that waits for approval asked inline, /checkpoints, /rollback and
/close, as a person types them."""

from __future__ import annotations

import asyncio
import json
import os
import pty
import sys
import uuid

import pytest

from ratchet.contracts import Phase
from tests.plugins.probe import PROBE_LOG
from tests.runs import call, start, wait_for
from tests.sessions.test_sessions import awaiting, session

SCRIPT = [
    {"content": "hello, I am listening"},
    {"tool_calls": [call("probe_append", label="ask-first")]},
    {"content": "appended it for you"},
]


pytestmark = pytest.mark.e2e  # a CLI process on a pseudo-terminal, about 15 s a test


class Terminal:
    """`ratchet ARGS` on a pseudo-terminal: what it prints, and lines typed into it."""

    def __init__(self, settings, *args: str) -> None:
        self.settings, self.args, self.seen = settings, args, ""

    async def __aenter__(self) -> Terminal:
        master, slave = pty.openpty()
        env = dict(
            os.environ, TEMPORAL_ADDRESS=self.settings.temporal_address, RATCHET_TASK_QUEUE=self.settings.task_queue
        )
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "ratchet.cli.main", *self.args, stdin=slave, stdout=slave, stderr=slave, env=env
        )
        os.close(slave)
        self.master = master
        return self

    async def __aexit__(self, *exc) -> None:
        if self.proc.returncode is None:
            self.proc.kill()
        await self.proc.wait()
        os.close(self.master)

    async def expect(self, text: str, timeout: float = 30) -> str:
        """Everything printed up to and including `text` (fails after `timeout` s)."""
        async with asyncio.timeout(timeout):
            while text not in self.seen:
                chunk = await asyncio.to_thread(os.read, self.master, 4096)
                self.seen += chunk.decode(errors="replace").replace("\r\n", "\n")
        upto = self.seen.index(text) + len(text)
        shown, self.seen = self.seen[:upto], self.seen[upto:]
        return shown

    def type(self, line: str) -> None:
        os.write(self.master, (line + "\n").encode())


async def test_ratchet_chat_in_a_terminal(client, settings, worker):
    run = await start(client, settings, session(SCRIPT, workspace="sess-chat"))
    await wait_for(run, awaiting)
    async with Terminal(settings, "chat", run.workflow_id) as term:
        await term.expect("you> ")
        term.type("please append")
        asked = await term.expect("[y/N] ")
        assert "approve probe_append" in asked and "ask-first" in asked
        term.type("y")
        answered = await term.expect("# turn 2: answered")
        assert "appended it for you" in answered
        await term.expect("you> ")
        term.type("/checkpoints")
        listed = await term.expect("you> ")
        assert "turn-1:" in listed and "turn-2:" in listed
        term.type("/rollback turn-1")
        rolled = await term.expect("you> ")
        assert "undone 1" in rolled and "turns removed: 2" in rolled
        term.type("/close")
        await term.expect("closing")
        assert await asyncio.wait_for(term.proc.wait(), 30) == 0
    assert (await run.result()).phase == Phase.DONE
    log = (settings.workspace_root / "sess-chat" / PROBE_LOG).read_text()
    assert "done" in log and "undone" in log


async def test_ratchet_chat_starts_a_session_and_leaves_it_open(client, settings, worker, tmp_path):
    from ratchet.client import RatchetClient

    path = tmp_path / "run.json"
    path.write_text(json.dumps({"model": session(SCRIPT)["model"]}))
    workflow_id = f"chat-{uuid.uuid4().hex[:8]}"
    async with Terminal(settings, "chat", "--agent", "chatter", "--file", str(path), "--id", workflow_id) as term:
        await term.expect("you> ")
        term.type("are you there?")
        assert "hello, I am listening" in await term.expect("# turn 1: answered")
        await term.expect("you> ")
        term.type("/quit")
        assert f"`ratchet chat {workflow_id}` rejoins it" in await term.expect("rejoins it")
        assert await asyncio.wait_for(term.proc.wait(), 30) == 0
    run = RatchetClient(client, settings).get(workflow_id)
    state = await wait_for(run, awaiting)
    assert [t.question for t in state.session.turns.items] == ["are you there?"]
    await run.close()
