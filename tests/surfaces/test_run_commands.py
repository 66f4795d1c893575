"""`ratchet checkpoints | rollback | fork` and the plain `temporal` CLI equivalents, as subprocesses."""

from __future__ import annotations

import json

import pytest

from ratchet.contracts import AgentResult, Phase
from tests.runs import ratchet, runs, scripted, start, temporal_cli, wait_for
from tests.workflows.test_rollback import TWO_CHECKPOINTS

pytestmark = pytest.mark.e2e  # processes as a user runs them: `make test-e2e`, not `make test`

SLOW = TWO_CHECKPOINTS[:2] + [{"tool_calls": [{"name": "probe_wait", "arguments": {"seconds": 3}}]}] + [
    {"content": "finished"}
]


async def test_checkpoints_rollback_and_fork_from_the_command_line(client, settings, worker, dev_server):
    handle = await start(client, settings, scripted("saga", SLOW, workspace="cli"))
    await wait_for(handle, lambda s: len(s.effects.checkpoints.items) == 2)
    await handle.pause()  # rollback requests are served while paused
    await wait_for(handle, lambda s: s.phase == Phase.PAUSED)

    code, out = await ratchet(settings, "checkpoints", handle.workflow_id)
    assert code == 0, out
    assert "cp-1" in out and "cp-2" in out and "exit 0" in out

    code, out = await ratchet(settings, "rollback", handle.workflow_id, "cp-1", "--dry-run")
    undone = [line for line in out.splitlines() if line.split()[:1] == ["undo"]]
    assert code == 0 and len(undone) == 3 and "dry run: 3 to undo, nothing changed" in out, out

    code, out = await temporal_cli(
        dev_server.address, "workflow", "update", "execute", "--workflow-id", handle.workflow_id,
        "--name", "rollback", "--input", json.dumps({"checkpoint_id": "cp-1", "then": "stop"}),
    )
    assert code == 0, out
    result: AgentResult = await handle.result()
    assert result.phase == Phase.ROLLED_BACK
    assert (settings.workspace_root / "cli" / "a.txt").read_text() == "v1\n"

    code, out = await ratchet(settings, "fork", handle.workflow_id, "cp-1", "--new-id", f"{handle.workflow_id}-f", "--objective", "again")
    assert code == 0, out
    forked = runs(client, settings).get(f"{handle.workflow_id}-f")
    assert (await forked.result()).phase == Phase.DONE
    assert (await forked.state()).conversation.messages.items[-1].content == "finished"
