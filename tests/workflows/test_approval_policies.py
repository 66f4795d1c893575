"""Policies instead of clicks (issue #41, item 4), on the dev server with the scripted model and
profile `policy` (tests/plugins/policy.py: every write_file and probe_pay asks a person unless a
rule, a grant or an approved plan spares it): each automatic approval recorded with what made it.
A grant's expiry is tested on the time-skipping server (tests/workflows/test_background_time.py)."""

from __future__ import annotations

from ratchet.contracts import Phase
from tests.plugins.probe import PROBE_LOG
from tests.runs import call, ratchet, scripted, start, wait_for


def waiting(state) -> list[str]:
    return [p.call_id for p in state.calls.pending_approvals]


async def test_a_rule_approves_a_docs_write_and_a_small_payment_without_a_person(client, settings, worker):
    script = [
        {"tool_calls": [call("write_file", path="docs/guide/intro.md", content="hello\n")]},
        {"tool_calls": [call("probe_pay", amount=99.5, to="ana")]},
        {"content": "done"},
    ]
    run = await start(client, settings, scripted("policy", script, workspace="pol-rule"))
    assert (await run.result()).phase == Phase.DONE
    state = await run.state()
    by = {cid: d.by for cid, d in state.calls.decisions.items()}
    assert by == {"call_1_0": "rule:write_file path=docs/**", "call_2_0": "rule:probe_pay amount=<100"}
    assert all(d.approved and d.at for d in state.calls.decisions.values())
    workspace = settings.workspace_root / "pol-rule"
    assert (workspace / "docs/guide/intro.md").read_text() == "hello\n"
    assert (workspace / PROBE_LOG).read_text() == "paid 99.5 to ana\n"


async def test_a_path_escaping_docs_asks_and_a_rejected_one_never_runs(client, settings, worker):
    script = [{"tool_calls": [call("write_file", path="docs/../secrets.txt", content="x")]}, {"content": "ok"}]
    run = await start(client, settings, scripted("policy", script, workspace="pol-escape"))
    state = await wait_for(run, lambda s: s.phase == Phase.AWAITING_APPROVAL)
    assert waiting(state) == ["call_1_0"] and state.calls.decisions == {}
    await run.reject("call_1_0", "outside docs")
    assert (await run.result()).phase == Phase.DONE
    assert not (settings.workspace_root / "pol-escape" / "secrets.txt").exists()
    assert (await run.state()).calls.decisions["call_1_0"].by != "rule:write_file path=docs/**"


async def test_three_of_five_calls_of_one_step_approved_run_exactly_those_three(client, settings, worker):
    pays = [call("probe_pay", amount=100 + i, to=f"p{i}") for i in range(5)]
    run = await start(
        client, settings, scripted("policy", [{"tool_calls": pays}, {"content": "done"}], workspace="pol-3of5")
    )
    ids = [f"call_1_{i}" for i in range(5)]
    await wait_for(run, lambda s: waiting(s) == ids)
    code, out = await ratchet(settings, "approve", run.workflow_id, "call_1_0", "call_1_2", "call_1_4")
    assert code == 0 and out.count("approved call_1_") == 3, out
    await wait_for(run, lambda s: waiting(s) == ["call_1_1", "call_1_3"])
    code, out = await ratchet(settings, "approve", run.workflow_id, "call_1_0")
    assert code == 1 and "already decided" in out  # a decision is made once
    for cid in ("call_1_1", "call_1_3"):
        await run.reject(cid, "not this one")
    assert (await run.result()).phase == Phase.DONE
    log = (settings.workspace_root / "pol-3of5" / PROBE_LOG).read_text().splitlines()
    assert log == ["paid 100 to p0", "paid 102 to p2", "paid 104 to p4"]


async def test_an_approved_plan_spares_the_calls_inside_it_and_a_call_outside_asks(client, settings, worker):
    envelope = [
        {"tool": "write_file", "when": {"path": {"glob": "src/**"}}},
        {"tool": "probe_pay", "when": {"to": {"equals": "ana"}, "amount": {"le": 500}}},
    ]
    script = [
        {"tool_calls": [call("propose_plan", summary="write the module, pay ana", calls=envelope)]},
        {
            "tool_calls": [
                call("write_file", path="src/m.py", content="x = 1\n"),
                call("probe_pay", amount=400, to="ana"),
            ]
        },
        {"tool_calls": [call("probe_pay", amount=400, to="bob")]},
        {"content": "done"},
    ]
    run = await start(client, settings, scripted("policy", script, workspace="pol-plan"))
    state = await wait_for(run, lambda s: waiting(s) == ["call_1_0"])
    [pending] = state.calls.pending_approvals
    assert pending.reason.startswith("plan for 3600s: write the module, pay ana [envelope: write_file path=src/**;")
    await run.approve("call_1_0")
    state = await wait_for(run, lambda s: waiting(s) == ["call_3_0"])
    assert state.calls.decisions["call_2_0"].by == state.calls.decisions["call_2_1"].by == "grant:g1"
    assert state.calls.grants[0].source == "plan call_1_0"
    await run.reject("call_3_0", "bob is not in the plan")
    assert (await run.result()).phase == Phase.DONE
    assert (settings.workspace_root / "pol-plan" / PROBE_LOG).read_text() == "paid 400 to ana\n"


async def test_a_grant_spares_later_calls_and_holds_across_continue_as_new(client, settings, worker):
    writes = [{"tool_calls": [call("write_file", path=f"notes/{i}.md", content=str(i))]} for i in range(10)]
    run = await start(client, settings, scripted("policy_long", [*writes, {"content": "done"}], workspace="pol-can"))
    await wait_for(run, lambda s: waiting(s) == ["call_1_0"])
    await run.approve("call_1_0", grant={"for_s": 3600})
    assert (await run.result()).phase == Phase.DONE
    state = await run.state()
    assert state.continued >= 1 and [g.id for g in state.calls.grants] == ["g1"]
    assert {cid: d.by for cid, d in state.calls.decisions.items() if cid != "call_1_0"} == {
        f"call_{step}_0": "grant:g1" for step in range(2, 11)
    }
