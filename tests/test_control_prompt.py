"""A rollback, a pause or a cancel is served at once, not at the next step boundary: it interrupts
an approval wait or a `wait` timer, and cancels a running tool through its heartbeat before
anything is undone (dev server, real time)."""

from __future__ import annotations

import asyncio
import time

import pytest
from temporalio.client import WorkflowFailureError

from ratchet.contracts import ErrorType, Phase, RollbackReport, RollbackRequest
from tests.plugins.probe import PROBE_LOG
from tests.runs import call, scripted, start
from tests.test_rollback import wait_for

PROMPT_S = 10.0
"""Well over what serving takes (a tool's cancellation reaches it within 0.8 of its 5 s heartbeat
timeout), well under the 30 s to 1 h the interrupted things would have taken."""


FIRST_CHECKPOINT = {"tool_calls": [call("write_file", path="a.txt", content="v1")]}


def log(settings, workspace: str) -> list[str]:
    return [line.split()[0] for line in (settings.workspace_root / workspace / PROBE_LOG).read_text().splitlines()]


async def rollback_now(handle, then: str = "stop") -> tuple[RollbackReport, float]:
    started = time.monotonic()
    report = await handle.execute_update(
        "rollback", RollbackRequest(checkpoint_id="cp-1", then=then), result_type=RollbackReport,
    )
    return report, time.monotonic() - started


async def test_a_rollback_stops_a_running_tool_before_undoing_it(client, settings, worker):
    script = [FIRST_CHECKPOINT, {"tool_calls": [call("slow_note", note="n", seconds=60)]}, {"content": "never"}]
    handle = await start(client, settings, scripted("control", script, workspace="ctl-tool"))
    await wait_for(handle, lambda s: s.step == 2 and len(s.effects) == 2)
    await asyncio.sleep(0.5)  # the tool is running
    report, took = await rollback_now(handle)
    assert took < PROMPT_S, f"rollback took {took:.1f}s"
    assert [u.split()[2] for u in report.undone] == ["slow_note"]
    assert (await handle.result()).phase == Phase.ROLLED_BACK
    # the undo ran after the tool had stopped, never beside it
    assert log(settings, "ctl-tool") == ["start", "stopped", "undone"]


async def test_a_cancel_stops_a_running_tool_before_undoing_it(client, settings, worker):
    script = [{"tool_calls": [call("slow_note", note="n", seconds=60)]}, {"content": "never"}]
    handle = await start(client, settings, scripted("control", script, workspace="ctl-cancel", on_failure="rollback_all"))
    await wait_for(handle, lambda s: len(s.effects) == 1)
    await asyncio.sleep(0.5)
    started = time.monotonic()
    await handle.cancel()
    with pytest.raises(WorkflowFailureError):
        await handle.result()
    assert time.monotonic() - started < PROMPT_S
    state = await handle.state()
    assert state.phase == Phase.CANCELLED and state.rollbacks[-1].clean
    assert log(settings, "ctl-cancel") == ["start", "stopped", "undone"]


async def test_a_rollback_interrupts_an_approval_wait(client, settings, worker):
    script = [FIRST_CHECKPOINT, {"tool_calls": [call("create_ticket", title="prod: restart db")]}, {"content": "never"}]
    handle = await start(client, settings, scripted("control", script, workspace="ctl-appr"))
    await wait_for(handle, lambda s: len(s.pending_approvals) == 1)
    report, took = await rollback_now(handle)
    assert took < PROMPT_S and report.clean
    assert (await handle.result()).phase == Phase.ROLLED_BACK
    state = await handle.state()
    assert state.pending_approvals == [] and state.effects[-1].tool == "write_file"


async def test_a_pause_interrupts_a_wait_and_the_model_is_told(client, settings, worker):
    script = [{"tool_calls": [call("wait", seconds=3600)]}, {"content": "resumed"}]
    handle = await start(client, settings, scripted("control", script, workspace="ctl-pause"))
    await wait_for(handle, lambda s: s.phase == Phase.ACTING)
    await handle.signal("pause")
    await wait_for(handle, lambda s: s.phase == Phase.PAUSED, timeout=PROMPT_S)
    await handle.signal("resume")
    result = await handle.result()
    assert result.phase == Phase.DONE and result.answer == "resumed"
    state = await handle.state()
    [wait] = state.tool_calls
    assert wait.result.error_type == ErrorType.INTERRUPTED
    assert [m.content for m in state.messages if m.role == "tool"] == [f"ERROR: {wait.result.output}"]
