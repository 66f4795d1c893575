"""The runs of a chaos session: scripted runs with side effects (some fail on purpose, to exercise
compensation) and runs driven through the real openai client against a faulty endpoint."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from ratchet.contracts import Phase

BROKEN = "BROKEN"  # tests/plugins/chaos_tools.py: a non-empty BROKEN file fails verification
OK, FAIL, FAIL_ALL, MODEL = "ok", "fail", "fail_all", "model"


@dataclass
class ChaosRun:
    workflow_id: str
    kind: str
    input: dict[str, Any]

    @property
    def expect(self) -> Phase:
        return Phase.FAILED if self.kind in (FAIL, FAIL_ALL) else Phase.DONE

    @property
    def compensates(self) -> bool:
        return self.kind in (FAIL, FAIL_ALL)


def write(path: str, content: str) -> dict:
    return {"name": "write_file", "arguments": {"path": path, "content": content}}


def ticket(title: str, body: str = "") -> dict:
    return {"name": "create_ticket", "arguments": {"title": title, "body": body}}


def send(to: str, body: str, linger_s: float = 0.0, fatal_after_send: bool = False) -> dict:
    args: dict[str, Any] = {"to": to, "body": body, "linger_s": linger_s}
    if fatal_after_send:
        args["fatal_after_send"] = True
    return {"name": "outbox_send", "arguments": args}


def fail(reason: str) -> dict:
    return {"name": "chaos_fail", "arguments": {"reason": reason}}


def scripted_steps(rng: random.Random, wid: str, kind: str) -> list[dict]:
    """3-5 steps of files, tickets and outbox messages; a failing run fails in its last step,
    after that step's own side effects (which the rollback must undo)."""
    steps = rng.randint(3, 5)
    broken_at = 2 if steps >= 4 and rng.random() < 0.4 else None  # step 2 is not a checkpoint
    script: list[dict] = []
    for j in range(1, steps + 1):
        last = j == steps
        calls = [write(f"s{j}.txt", f"{wid} step {j} \u2713 \u00fcn\u00efc\u00f8d\u00e9\n")]
        if rng.random() < 0.7:
            calls.append(ticket(f"{wid} s{j}", body=f"opened at step {j}"))
        if rng.random() < 0.7:
            calls.append(send("ops@example.com", f"{wid} step {j}", linger_s=rng.choice([0.0, 0.3, 1.0])))
        if j > 1 and not last and rng.random() < 0.3:
            calls.append(write("s1.txt", f"{wid} rewritten at step {j}\n"))
        if broken_at == j:
            calls.append(write(BROKEN, "verification fails while this is non-empty"))
        if broken_at is not None and j == broken_at + 1:
            calls.append(write(BROKEN, ""))
        if last and kind in (FAIL, FAIL_ALL):
            calls += [write("s1.txt", "clobbered by the failing step\n"), fail(f"{wid}: deliberate failure")]
        script.append({"tool_calls": calls})
    script.append({"content": f"done {wid}"})
    return script


MODEL_SCRIPT: list[dict] = [
    {"tool_calls": [write("m1.txt", "model step 1\n"), ticket("model ticket 1"), send("ops", "m1", 0.1)]},
    {"tool_calls": [write("m2.txt", "model step 2\n"), send("ops", "m2")]},
    {"tool_calls": [write("m1.txt", "model step 3 rewrote m1\n"), ticket("model ticket 3")]},
    {"content": "model run done"},
]
"""One script for every model run: the local endpoint picks replies by the turn, not the run."""


def kinds(n: int, model_share: float, rng: random.Random) -> list[str]:
    """`model_share` of the runs on the model endpoint; of the rest a quarter fail and roll back to
    their last checkpoint, 15% fail and roll back everything (at least one of each from 3 runs)."""
    models = round(n * model_share)
    rest = n - models
    fails = max(1, round(rest * 0.25)) if rest >= 2 else 0
    fail_alls = max(1, round(rest * 0.15)) if rest >= 3 else 0
    out = [MODEL] * models + [FAIL] * fails + [FAIL_ALL] * fail_alls + [OK] * (rest - fails - fail_alls)
    rng.shuffle(out)
    return out


def plan_runs(n: int, rng: random.Random, model_share: float, prefix: str, agent: str = "chaos") -> list[ChaosRun]:
    return [
        ChaosRun(f"{prefix}-{i:03d}", kind, run_input(rng, f"{prefix}-{i:03d}", kind, agent))
        for i, kind in enumerate(kinds(n, model_share, rng))
    ]


def run_input(rng: random.Random, wid: str, kind: str, agent: str = "chaos") -> dict[str, Any]:
    run: dict[str, Any] = {"agent": agent, "objective": f"chaos run {wid} ({kind})", "workspace": wid}
    if kind == MODEL:
        run["model"] = {"provider": "openai", "model": "ratchet-test", "timeout_s": 2.0}
    else:
        # timeout_s also bounds a scripted call's activity (start-to-close is timeout_s + 30 s)
        run["model"] = {"provider": "scripted", "options": {"script": scripted_steps(rng, wid, kind)}, "timeout_s": 2.0}
    if kind == FAIL_ALL:
        run["on_failure"] = "rollback_all"
    return run
