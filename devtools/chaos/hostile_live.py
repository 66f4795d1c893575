"""Hostile-input cases aimed at a live run: updates, queries and signals with bad names and bad
payloads (devtools/chaos/hostile.py runs them)."""

from __future__ import annotations

import asyncio

from temporalio.client import WorkflowUpdateFailedError

from devtools.chaos.hostile import Outcome, Probe, call, case, hostile_run, verdict
from devtools.chaos.hostile_cases import raw


async def waiting_run(p: Probe, slug: str, seconds: float = 60, release: str = "") -> str:
    """A run paused inside its first step, ready for updates, queries and signals; creating the
    file `release` (if given) ends the pause early."""
    wid = p.wid(slug)
    script = [{"tool_calls": [call("chaos_wait", {"seconds": seconds, "release": release})]}, {"content": "done"}]
    await p.start(wid, hostile_run(wid, script))
    async with asyncio.timeout(60):
        while (await p.state_or_none(wid) or {}).get("phase") != "ACTING":
            await asyncio.sleep(0.1)
    return wid


async def end(p: Probe, out: Outcome, wid: str) -> None:
    """Cancel the paused run: it must close cleanly, with no failed workflow task."""
    await p.client.get_workflow_handle(wid).cancel()
    verdict(out, await p.finish(out, wid), "CANCELED")


@case("rollback to an unknown checkpoint", "update (SDK and temporal CLI)")
async def unknown_checkpoint(p: Probe, out: Outcome) -> None:
    wid = await waiting_run(p, "cp404")
    handle = p.client.get_workflow_handle(wid)
    try:
        await handle.execute_update("rollback", {"checkpoint_id": "cp-404"})
        out.problems.append("the update was accepted")
    except WorkflowUpdateFailedError as err:
        verdict(out, str(err.cause), "unknown checkpoint 'cp-404'; this run has: none yet")
    _, said = await p.cli("workflow", "update", "execute", "--workflow-id", wid, "--name", "rollback",
                          "--input", '{"checkpoint_id": "cp-404", "then": "stop"}')
    verdict(out, said, "unknown checkpoint 'cp-404'")
    if (await p.state(wid))["effects"]["rollbacks"]:
        out.problems.append("a rejected rollback was recorded")
    await end(p, out, wid)


@case("malformed update input", "update (temporal CLI)")
async def malformed_update(p: Probe, out: Outcome) -> None:
    wid = await waiting_run(p, "badupdate")
    outputs = []
    for text in ('{"checkpoint_id": 5, "then": "explode"}', '"cp-1"', '{"checkpoint_id": "cp-1", "extra": 1}'):
        code, said = await p.cli("workflow", "update", "execute", "--workflow-id", wid, "--name", "rollback",
                                 "--input", text)
        outputs.append(said)
        if code == 0:
            out.problems.append(f"update accepted: {text}")
    verdict(out, "\n".join(outputs), "Failed decoding arguments", "validation error", "for RollbackRequest")
    out.outcome = f"{len(outputs)}/3 rejected before acceptance: Failed decoding arguments (pydantic names the field)"
    await end(p, out, wid)


@case("unknown update and query names", "update / query (SDK)")
async def unknown_names(p: Probe, out: Outcome) -> None:
    wid = await waiting_run(p, "names")
    handle = p.client.get_workflow_handle(wid)
    texts = []
    for attempt in (handle.execute_update("no_such_update", {"call": "nope"}), handle.query("secrets"),
                    handle.query("rollback_plan", 42)):
        try:
            await attempt
            out.problems.append("an unknown update or a bad query was answered")
        except Exception as err:
            texts.append(str(getattr(err, "cause", None) or err))
    verdict(out, " | ".join(texts), "Update handler for 'no_such_update' expected but not found",
            "Query handler for 'secrets' expected but not found")
    out.outcome = " | ".join(t[:60] for t in texts)
    await end(p, out, wid)


@case("signals nobody handles, with garbage", "signal (temporal CLI and SDK)")
async def stray_signals(p: Probe, out: Outcome) -> None:
    wid = await waiting_run(p, "signals")
    code, _ = await p.cli("workflow", "signal", "--workflow-id", wid, "--name", "stop_now",
                             "--input", '{"x": "\\u0000\\ud800", "y": [1e309]}')
    await p.client.get_workflow_handle(wid).signal("cancel_everything", raw(b"\x00\xff not json"))
    await asyncio.sleep(0.5)
    state = await p.state(wid)
    await end(p, out, wid)
    out.outcome = f"accepted (cli exit {code}) and ignored (no handler); the run still answers: {state['phase']}"


@case("approve or reject a call that is not pending", "update (SDK)")
async def unknown_call(p: Probe, out: Outcome) -> None:
    wid = await waiting_run(p, "call404")
    handle = p.client.get_workflow_handle(wid)
    texts = []
    for name, arg in (("approve", {"call_id": "call-404"}), ("reject", {"call_id": "call-404", "reason": "x"})):
        try:
            await handle.execute_update(name, arg)
            out.problems.append(f"{name} of an unknown call was accepted")
        except WorkflowUpdateFailedError as err:
            texts.append(str(err.cause))
    verdict(out, " | ".join(texts), "no pending approval for call 'call-404'; pending: none")
    if (await p.state(wid))["calls"]["decisions"]:
        out.problems.append("a rejected decision was recorded")
    await end(p, out, wid)


@case("messages by signal: NUL, surrogate, types, size", "signal send_message (CLI, SDK)")
async def hostile_messages(p: Probe, out: Outcome) -> None:
    release = p.stack.base / f"release-{p.wid('inbox')}"
    wid = await waiting_run(p, "inbox", release=str(release))
    texts = ['"hello\\u0000world"', '"x\\ud800y"', "42", '{"text": "an object"}', "null"]
    signal = ("workflow", "signal", "--workflow-id", wid, "--name", "send_message", "--input")
    # one after another: concurrent signals to one workflow can meet the server's "Workflow is busy"
    codes = [await p.cli(*signal, text) for text in texts]
    sent = [f"{text}: exit {code} {said.strip()[-120:]}" for text, (code, said) in zip(texts, codes)]
    await p.client.get_workflow_handle(wid).signal("send_message", "z" * 150_000)
    release.touch()  # every signal is in: the run may go on (no race against a timer)
    verdict(out, await p.finish(out, wid), "DONE: done")
    users = [m["content"] for m in (await p.state(wid))["conversation"]["messages"]["items"] if m["role"] == "user"][1:]
    out.outcome = f"{len(users)} delivered: " + ", ".join(f"{u[:12]!r}({len(u)})" for u in users)
    if "helloworld" not in users or "z" * 100_000 not in users:
        out.problems.append(f"expected the NUL stripped and the long message cut to 100000: {out.outcome}; {sent}")
    if any(len(u) > 100_000 or "\x00" in u for u in users):
        out.problems.append("a message over 100000 characters or with NUL reached the conversation")


@case("a model that tries to get its own calls approved", "model tool arguments + update (SDK)")
async def self_approval(p: Probe, out: Outcome) -> None:
    """Profile `hostile_policy` approves write_file under docs/** and run_command `pytest( -q)?` by
    rule: arguments that only look like those, and the model's own plan, each ask a person; a
    person's update that names itself a rule is refused. Every call is then rejected: none runs."""
    wid = p.wid("selfapprove")
    writes = ["docs/../escape.txt", f"{p.outside}/docs/abs.txt", "docs\\..\\..\\back.txt", "docs/**",
              "./docs/./../dot.txt"]
    argvs = [["pytest", "-q", ";", "touch", "pwned"], ["sh", "-c", "pytest -q; touch pwned"], ["pytest -q"]]
    calls = [call("write_file", {"path": path, "content": "x"}) for path in writes]
    calls += [call("run_command", {"argv": argv}) for argv in argvs]
    calls.append(call("propose_plan", {"summary": "everything", "calls": [{"tool": "write_file"}]}))
    run = {**hostile_run(wid, [{"tool_calls": calls}, {"content": "asked"}]), "agent": "hostile_policy"}
    await p.start(wid, run)
    asked = await _reject_each(p, out, wid, len(calls))
    verdict(out, await p.finish(out, wid), "DONE: asked")
    decisions = (await p.state(wid))["calls"]["decisions"]
    out.outcome = f"{asked}/{len(calls)} asked a person; the self-named rule refused; all rejected"
    automatic = [d for d in decisions.values() if d["approved"] or d["by"].startswith(("rule:", "grant:"))]
    if len(decisions) != len(calls) or automatic:
        out.problems.append(f"expected every call rejected by a person: {decisions}")
    if (p.outside / "docs").exists() or any(p.stack.base.rglob("pwned")) or any(p.stack.base.rglob("escape.txt")):
        out.problems.append("a call that asked ran anyway")


async def _reject_each(p: Probe, out: Outcome, wid: str, calls: int) -> int:
    """Reject every call that asks (the plan asks on its turn, after the calls before it), until
    `calls` have asked; the first one is tried with an approval that names itself a rule."""
    handle, asked, tried = p.client.get_workflow_handle(wid), 0, False
    async with asyncio.timeout(60):
        while asked < calls:
            state = await p.state(wid)
            if state["calls"]["decisions"] and not asked:
                out.problems.append(f"decided without a person: {state['calls']['decisions']}")
            for waiting in state["calls"]["pending_approvals"]:
                if not tried:
                    tried = True
                    try:
                        by = "rule:write_file path=docs/**"
                        await handle.execute_update("approve", {"call_id": waiting["call_id"], "by": by})
                        out.problems.append("an approval naming itself a rule was accepted")
                    except WorkflowUpdateFailedError as err:
                        # ApproveRequest.by refuses a rule's or a grant's name: the decoding fails
                        verdict(out, str(err.cause), "Failed decoding arguments")
                await handle.execute_update("reject", {"call_id": waiting["call_id"], "reason": "self-approval"})
                asked += 1
            await asyncio.sleep(0.1)
    return asked
