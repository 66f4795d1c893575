"""The cases of the hostile-input catalogue (devtools/chaos/hostile.py) that go through a run's
input and the model's tool calls; hostile_live.py has those aimed at a live run (updates,
queries, signals). Each names the public surface it goes through and the clear error it expects."""

from __future__ import annotations

import json

from temporalio.api.common.v1 import Payload
from temporalio.common import RawValue

from devtools.chaos.hostile import Outcome, Probe, call, case, hostile_run, verdict


def raw(data: bytes) -> RawValue:
    return RawValue(Payload(metadata={"encoding": b"json/plain"}, data=data))


async def cli_run(p: Probe, out: Outcome, slug: str, text: str, *needles: str, wid: str | None = None) -> str:
    wid = wid or p.wid(slug)
    code, said = await p.cli_start(wid, text)
    if code != 0:
        return verdict(out, said, *needles)
    return verdict(out, await p.finish(out, wid), *needles)


def agent(**fields: object) -> str:
    return json.dumps({"agent": "hostile", "objective": "hostile input", **fields})


@case("malformed JSON", "temporal CLI --input")
async def malformed_cli(p: Probe, out: Outcome) -> None:
    wid = p.wid("malformed")
    code, said = await p.cli_start(wid, '{"agent": "hostile", "objective": ')
    verdict(out, said, "not valid JSON")
    if code == 0 or await p.exists(wid):
        out.problems.append("the CLI started a run from malformed JSON")


@case("malformed JSON payload", "SDK raw payload (json/plain)")
async def malformed_payload(p: Probe, out: Outcome) -> None:
    wid = p.wid("malformed-raw")
    await p.start(wid, raw(b'{"agent": "hostile", "objective": '))
    verdict(out, await p.finish(out, wid), "FAILED", "input is not valid JSON")


@case("input not an object", "temporal CLI --input")
async def not_object(p: Probe, out: Outcome) -> None:
    await cli_run(p, out, "array", "[1, 2, 3]", "FAILED", "input must be a JSON object")


@case("wrong types", "temporal CLI --input")
async def wrong_types(p: Probe, out: Outcome) -> None:
    text = json.dumps({"agent": 42, "objective": ["x"], "budget": {"max_steps": "many"}})
    await cli_run(p, out, "types", text, "FAILED", "agent: Input should be a valid string", "budget.max_steps")


@case("unknown field", "temporal CLI --input")
async def unknown_field(p: Probe, out: Outcome) -> None:
    await cli_run(p, out, "field", agent(max_stepz=3), "FAILED", "max_stepz: Extra inputs are not permitted")


@case("unknown profile", "temporal CLI --input")
async def unknown_profile(p: Probe, out: Outcome) -> None:
    text = json.dumps({"agent": "no-such-agent", "objective": "x"})
    await cli_run(p, out, "profile", text, "FAILED", "unknown profile 'no-such-agent'")


@case("negative budget", "temporal CLI --input")
async def negative_budget(p: Probe, out: Outcome) -> None:
    text = agent(budget={"max_steps": -5, "max_cost_usd": -1})
    await cli_run(p, out, "negative", text, "FAILED", "budget.max_steps: Input should be greater than or equal to 1")


@case("absurd budget", "temporal CLI --input")
async def absurd_budget(p: Probe, out: Outcome) -> None:
    text = agent(budget={"max_steps": 10**15, "max_tokens": 10**30, "max_duration_s": 1e300})
    await cli_run(p, out, "absurd", text, "FAILED", "budget.max_steps", "budget.max_tokens", "budget.max_duration_s")


@case("NaN and Infinity budget", "SDK raw payload (json/plain)")
async def nan_budget(p: Probe, out: Outcome) -> None:
    wid = p.wid("nan")
    body = b'{"agent": "hostile", "objective": "x", "budget": {"max_cost_usd": NaN, "max_duration_s": Infinity}}'
    await p.start(wid, raw(body))
    verdict(out, await p.finish(out, wid), "FAILED", "budget.max_cost_usd", "budget.max_duration_s")


@case("objective over 2 MB", "temporal CLI --input-file")
async def huge_objective(p: Probe, out: Outcome) -> None:
    wid = p.wid("huge")
    path = p.stack.base / f"{wid}.json"
    path.write_text(json.dumps({"agent": "hostile", "objective": "x" * (2 * 1024 * 1024 + 1)}))
    code, said = await p.cli_start(wid, file=path)
    if code != 0:
        verdict(out, said, "Blob data size exceeds limit")
        if await p.exists(wid):
            out.problems.append("the server refused the start but a run exists")
    else:
        verdict(out, await p.finish(out, wid), "FAILED", "objective")


@case("objective over the 200k-character limit", "temporal CLI --input-file")
async def long_objective(p: Probe, out: Outcome) -> None:
    wid = p.wid("long")
    path = p.stack.base / f"{wid}.json"
    path.write_text(json.dumps({"agent": "hostile", "objective": "y" * 300_000}))
    code, said = await p.cli_start(wid, file=path)
    text = said if code else await p.finish(out, wid)
    verdict(out, text, "objective: String should have at most 200000 characters")


@case("NUL bytes in the input", "temporal CLI --input")
async def nul_input(p: Probe, out: Outcome) -> None:
    text = json.dumps({"agent": "hostile", "objective": "fix\u0000this", "workspace": "ws\u0000x"})
    await cli_run(p, out, "nul", text, "FAILED", "objective: Value error, must not contain NUL", "workspace")


@case("workspace outside the root", "temporal CLI --input")
async def workspace_escape(p: Probe, out: Outcome) -> None:
    await cli_run(p, out, "ws", agent(workspace="../../etc"), "FAILED", "workspace: String should match pattern")


@case("odd unicode (RTL override, emoji, ZWJ)", "temporal CLI --input + model tool args")
async def odd_unicode(p: Probe, out: Outcome) -> None:
    wid = p.wid("unicode")
    odd = "\u202eexe.txt\u202c \U0001F9E8 e\u0301 \U0001F469\u200d\U0001F4BB \ufeff"
    name = "\u202etxt.exe"
    script = [{"tool_calls": [call("write_file", {"path": name, "content": odd})]}, {"content": odd}]
    await cli_run(p, out, "unicode", json.dumps({**hostile_run(wid, script), "objective": odd}), "DONE", wid=wid)
    state = await p.state(wid)
    if state["run"]["objective"] != odd or state["answer"] != odd:
        out.problems.append("the objective or the answer did not round-trip exactly")
    if p.stack.workspace(wid).joinpath(name).read_text() != odd:
        out.problems.append("the file written under an RTL-override name is not in the workspace")


@case("lone surrogate in the objective", "temporal CLI --input (JSON escape)")
async def surrogate_input(p: Probe, out: Outcome) -> None:
    text = '{"agent": "hostile", "objective": "fix \\ud800 this"}'
    await cli_run(p, out, "surrogate", text, "FAILED", "InvalidInput: input is not valid JSON")


@case("lone surrogate in tool arguments", "model tool arguments (JSON escape)")
async def surrogate_arguments(p: Probe, out: Outcome) -> None:
    wid = p.wid("surrogate-args")
    args = '{"path": "s.txt", "content": "\\udc80 lone"}'
    await p.start(wid, hostile_run(wid, [{"tool_calls": [call("write_file", args)]}, {"content": "survived"}]))
    verdict(out, await p.finish(out, wid), "DONE")
    if await p.exists(wid) and not out.problems:
        verdict(out, (await p.tool_messages(wid))[0], "surrogate")


@case("path traversal in file tools", "model tool arguments")
async def traversal(p: Probe, out: Outcome) -> None:
    wid = p.wid("traversal")
    calls = [
        call("write_file", {"path": "../escape.txt", "content": "x"}),
        call("write_file", {"path": f"{p.outside}/abs.txt", "content": "x"}),
        call("read_file", {"path": "/etc/passwd"}),
        call("list_files", {"path": "../.."}),
        call("write_file", {"path": "a\u0000b", "content": "x"}),
    ]
    await p.start(wid, hostile_run(wid, [{"tool_calls": calls}, {"content": "refused"}]))
    verdict(out, await p.finish(out, wid), "DONE")
    results = await p.tool_results(wid)
    out.outcome = "each refused: " + "; ".join(r.split(":")[-1].strip()[:28] for r in results)
    verdict(out, "\n".join(results), "contains '..'", "is absolute", "without NUL characters")
    if any("wrote" in r or "root:" in r for r in results):
        out.problems.append(f"a traversal succeeded: {results}")


@case("symlink escape in file tools", "model tool arguments (run_command ln -s)")
async def symlink_escape(p: Probe, out: Outcome) -> None:
    wid = p.wid("symlink")
    setup = [call("run_command", {"argv": ["ln", "-s", str(p.outside), "link"]}),
             call("run_command", {"argv": ["ln", "-s", str(p.outside / "secret.txt"), "secret"]})]
    attacks = [
        call("write_file", {"path": "link/pwned.txt", "content": "x"}),
        call("read_file", {"path": "link/secret.txt"}),
        call("write_file", {"path": "secret", "content": "overwritten"}),
        call("list_files", {"path": "link"}),
    ]
    await p.start(wid, hostile_run(wid, [{"tool_calls": setup}, {"tool_calls": attacks}, {"content": "refused"}]))
    verdict(out, await p.finish(out, wid), "DONE")
    results = (await p.tool_results(wid))[2:]
    out.outcome = f"{sum('escapes the workspace' in r for r in results)}/4 refused: escapes the workspace (symlink)"
    if sum("escapes the workspace (through a symlink)" in r for r in results) != 4:
        out.problems.append(f"not every symlink escape was refused: {results}")


@case("shell injection in run_command", "model tool arguments")
async def injection(p: Probe, out: Outcome) -> None:
    wid = p.wid("inject")
    calls = [
        call("run_command", {"argv": ["python", "-c", "print(1)", ";", "touch", "/tmp/pwned"]}),
        call("run_command", {"argv": ["python", "-c", "import sys; print(sys.argv[1:])", "$(touch x)", "`touch y`",
                                      "| touch z", "&& touch w", f"; touch {p.outside}/pwned"]}),
        call("run_command", {"argv": ["sh -c 'touch x'"]}),
    ]
    await p.start(wid, hostile_run(wid, [{"tool_calls": calls}, {"content": "no shell"}]))
    verdict(out, await p.finish(out, wid), "DONE")
    results = await p.tool_results(wid)
    out.outcome = "argv passed literally; 'sh -c ...' as one program name: " + results[2].split(":", 1)[-1][:40]
    verdict(out, "\n".join(results), "exit code 0\n1", "'$(touch x)', '`touch y`'", "cannot run \"sh -c 'touch x'\"")
    planted = [n for n in ("x", "y", "z", "w", "pwned") if (p.stack.workspace(wid) / n).exists()]
    if planted:
        out.problems.append(f"the injection created {planted} in the workspace")


@case("tool the profile does not allow", "model tool arguments")
async def not_allowed(p: Probe, out: Outcome) -> None:
    wid = p.wid("notallowed")
    calls = [call("create_ticket", {"title": "sneaky"}), call("outbox_send", {"to": "x", "body": "y"})]
    await p.start(wid, hostile_run(wid, [{"tool_calls": calls}, {"content": "refused"}]))
    verdict(out, await p.finish(out, wid), "DONE")
    state = await p.state(wid)
    messages = "\n".join(m.get("content") or "" for m in state["messages"] if m["role"] == "tool")
    out.outcome = messages.splitlines()[0][:110] if messages else out.outcome
    verdict(out, messages, "unknown tool 'create_ticket'; available tools: read_file", "unknown tool 'outbox_send'")
    if state["effects"] or p.stack.tracker_path.exists():
        out.problems.append("a refused tool left an effect or touched the tracker")


@case("malformed tool arguments", "model tool arguments")
async def bad_arguments(p: Probe, out: Outcome) -> None:
    wid = p.wid("badargs")
    calls = [call("read_file", "{not json"), call("read_file", "[1, 2]"), call("read_file", {"path": 5}),
             call("run_command", {"argv": "rm -rf /"}), call("run_command", {"argv": []})]
    await p.start(wid, hostile_run(wid, [{"tool_calls": calls}, {"content": "refused"}]))
    verdict(out, await p.finish(out, wid), "DONE")
    state = await p.state(wid)
    messages = "\n".join(m.get("content") or "" for m in state["messages"] if m["role"] == "tool")
    out.outcome = f"{messages.count('ERROR:')}/5 returned to the model as errors"
    verdict(out, messages, "not valid JSON", "must be a JSON object", "path: Input should be a valid string",
            "argv: Input should be a valid list", "argv: List should have at least 1 item")


@case("fork from a run that does not exist", "temporal CLI --input")
async def fork_unknown(p: Probe, out: Outcome) -> None:
    wid = p.wid("fork")
    run = hostile_run(wid, [{"content": "x"}], resume_from={"workflow_id": "no-such-run", "checkpoint_id": "cp-1"})
    await cli_run(p, out, "fork", json.dumps(run), "FAILED", "no-such-run", wid=wid)
