"""An interrupted call of a tool that can neither reconcile nor repeat safely becomes a decision
(AWAITING_DECISION), not a failed run; a tool that raises NotStarted is an ordinary retry."""

from __future__ import annotations

import pytest

from ratchet.client import RunFailed
from ratchet.contracts import AgentResult, ErrorType, Phase
from ratchet.stores.ledger import EntryStatus, SqliteLedger
from tests.runs import ratchet, scripted, start, wait_for
from tests.surfaces.test_background_cli import listed


def charge(label: str, **flags) -> dict:
    return {"tool_calls": [{"name": "probe_charge", "arguments": {"label": label, **flags}}]}


async def wait_for_decision(handle, other_than: str | None = None):
    return await wait_for(handle, lambda s: s.calls.pending_decisions and s.calls.pending_decisions[0].call_id != other_than)


def charges(settings, workspace: str) -> list[str]:
    return (settings.workspace_root / workspace / "probe.log").read_text().splitlines()


async def test_assume_done_records_the_call_once_and_the_run_goes_on(client, settings, worker, dev_server):
    script = [charge("order-1", crash_after_acting=True), {"content": "charged"}]
    handle = await start(client, settings, scripted("decider", script, workspace="decide-1"))
    state = await wait_for_decision(handle)
    pending = state.calls.pending_decisions[0]
    assert state.phase == Phase.AWAITING_DECISION and pending.tool == "probe_charge"
    assert "outcome is unknown" in pending.error
    assert handle.workflow_id in await listed(dev_server.address, 'RatchetPhase="AWAITING_DECISION"')

    code, out = await ratchet(settings, "watch", handle.workflow_id, "--once")
    assert code == 0 and f"awaiting decision: {pending.call_id} probe_charge" in out, out
    code, out = await ratchet(settings, "decide", handle.workflow_id, "call_9_9", "retry")
    assert code == 1 and "no call 'call_9_9' waits for a decision" in out, out
    code, out = await ratchet(settings, "decide", handle.workflow_id, pending.call_id, "assume_done", "--result", "receipt R-1")
    assert code == 0, out

    result: AgentResult = await handle.result()
    assert result.phase == Phase.DONE
    assert charges(settings, "decide-1") == ["charged order-1 attempt 1"], "assume_done must not call again"
    state = await handle.state()
    assert state.calls.tool_calls.items[0].result.output == "receipt R-1" and state.calls.tool_calls.items[0].result.ok
    assert state.calls.outcome_decisions[pending.call_id].choice == "assume_done"
    entry = SqliteLedger(settings.ledger_path).get(pending.key)
    assert entry.status == EntryStatus.COMPLETED and entry.result["output"] == "receipt R-1"


async def test_retry_calls_again_and_fail_rolls_back(client, settings, worker):
    script = [charge("a", crash_after_acting=True), charge("b", crash_after_acting=True), {"content": "never"}]
    handle = await start(client, settings, scripted("decider", script, workspace="decide-2"))
    state = await wait_for_decision(handle)
    first = state.calls.pending_decisions[0].call_id
    await handle.decide(first, "retry")
    state = await wait_for_decision(handle, other_than=first)  # the second call is interrupted too
    assert state.calls.tool_calls.items[0].result.output == "charged a"
    await handle.decide(state.calls.pending_decisions[0].call_id, "fail")
    with pytest.raises(RunFailed) as failed:
        await handle.result()
    assert "AgentFailed" in str(failed.value.reason) and "outcome is unknown" in str(failed.value.reason)
    assert charges(settings, "decide-2") == [
        "charged a attempt 1", "charged a attempt 1",  # retry (a new activity): a person said it did not happen
        "charged b attempt 1", "refunded b", "refunded a",  # rollback_all undoes both, newest first
    ]


async def test_the_timeout_policy_skips_and_the_model_is_told(client, settings, worker):
    handle = await start(client, settings, scripted("decider_skips", [charge("c", crash_after_acting=True), {"content": "ok"}],
                                                  workspace="decide-3"))
    result: AgentResult = await handle.result()
    state = await handle.state()
    assert result.phase == Phase.DONE
    skipped = state.calls.tool_calls.items[0].result
    assert not skipped.ok and skipped.error_type == ErrorType.SKIPPED and "whether it took effect is unknown" in skipped.output
    assert state.calls.outcome_decisions[state.calls.tool_calls.items[0].call_id].by == "timeout"
    assert state.effects.stack.items[0].status == "failed", "a skipped call keeps its undo in the plan"


async def test_a_tool_that_did_not_start_is_retried_like_any_transient_error(client, settings, worker):
    handle = await start(client, settings, scripted("decider", [charge("d", not_started_first=True), {"content": "ok"}],
                                                  workspace="decide-4"))
    result: AgentResult = await handle.result()
    assert result.phase == Phase.DONE and not (await handle.state()).calls.outcome_decisions
    assert charges(settings, "decide-4") == ["charged d attempt 2"]
