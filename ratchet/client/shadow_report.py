"""A shadow batch's report, in the agent's terms (`RatchetClient.shadows.report`, `ratchet shadow report`).

Per run: the tool-call sequences of original and shadow and the first step where they part (tool
name and canonical arguments), the final answer (a text diff; a typed output field by field),
steps, tokens and cost of each, the calls the shadow did not run (quarantined, or answered with the
original's result), whether it diverged from the recorded replies (`--model recorded`), and the
verifier's verdict at the end (the last checkpoint's). Over all runs: same, diverged, verifier
better and worse, the cost ratio, quarantined calls, incomplete shadows. As JSON (the model) and
Markdown (`markdown`); `--fail-if` criteria are judged by `broken`.
"""

from __future__ import annotations

import asyncio
import difflib
import operator
import re
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from ratchet.client.errors import NotStartedYet, Refused, RunNotFound
from ratchet.contracts import AgentState, ErrorType, Phase, canonical

if TYPE_CHECKING:
    from ratchet.client.shadows import ShadowBatch, StateOf


READERS = 8
"""Runs compared at once (each comparison queries two states)."""


class Call(BaseModel):
    step: int
    tool: str
    arguments: str
    shadow: str | None = None


class Side(BaseModel):
    """One run's figures."""

    workflow_id: str
    phase: str
    steps: int
    tokens: int
    cost_usd: float
    answer: str | None
    output: Any = None
    verified: bool | None
    """The last checkpoint's verdict (None: the run's plan has no verifier)."""


class RunDiff(BaseModel):
    original: Side
    shadow: Side
    same: bool
    complete: bool
    """The shadow has closed, and not for lack of budget (one that ran out reports what it had)."""
    diverged_at: int | None = None
    """The step where the shadow left the recorded replies (`--model recorded`), or where its tool calls part."""
    departure: str = ""
    """Why it left the recorded replies at `diverged_at`: the message that differs, or (`--bisect`)
    the candidate's reply and the original's."""
    first_divergent_call: dict[str, Call | None] | None = None
    answer_diff: str = ""
    output_diff: dict[str, list[Any]] = Field(default_factory=dict)
    """Each field of the typed output that differs: [original's, shadow's]."""
    quarantined: list[Call] = Field(default_factory=list)


class Totals(BaseModel):
    runs: int = 0
    same: int = 0
    diverged: int = 0
    verifier_better: int = 0
    verifier_worse: int = 0
    cost_ratio: float = 1.0
    quarantined: int = 0
    incomplete: int = 0


class ShadowReport(BaseModel):
    batch: str
    runs: list[RunDiff]
    totals: Totals


async def build_report(get: Callable[[str], StateOf], batch: ShadowBatch, wait_s: float) -> ShadowReport:
    deadline = time.monotonic() + wait_s
    gate = asyncio.Semaphore(READERS)

    async def one(original: str, shadow: str) -> RunDiff:
        async with gate:
            return await _diff(get, original, shadow, deadline)

    diffs = list(await asyncio.gather(*(one(p.original, p.shadow) for p in batch.pairs)))
    return ShadowReport(batch=batch.id, runs=diffs, totals=totals(diffs))


async def _closed_state(
    get: Callable[[str], StateOf], workflow_id: str, deadline: float, original: AgentState
) -> AgentState:
    """The run's state once it has closed, or as it is at the deadline. A session shadow between
    turns is asked its original's next question, or closed after the original's last turn."""
    handle = get(workflow_id)
    while True:
        try:
            state = await handle.state()
        except (NotStartedYet, RunNotFound):
            state = None
        if state is not None and (state.phase.terminal or time.monotonic() >= deadline):
            return state
        if state is not None and state.phase == Phase.AWAITING_MESSAGE:
            await _next_turn(handle, state, original)
        if time.monotonic() >= deadline:
            raise RunNotFound(workflow_id)
        await asyncio.sleep(0.2)


async def _next_turn(handle: StateOf, state: AgentState, original: AgentState) -> None:
    number = state.session.turn_number + 1
    following = next((t for t in original.session.turns.items if t.number == number), None)
    try:
        if following is None:
            await handle.close()
        else:  # the same message id asked again is answered once
            await handle.ask(following.question, message_id=f"shadow-turn-{number}", wait=False)
    except Refused:  # it moved on meanwhile (the turn began, or the close was taken): read it again
        pass


async def _diff(get: Callable[[str], StateOf], original: str, shadow: str, deadline: float) -> RunDiff:
    theirs = await get(original).state()
    mine = await _closed_state(get, shadow, deadline, theirs)
    calls_o, calls_s = _calls(theirs, _from_step(mine, theirs)), _calls(mine)
    parted = next((i for i, (a, b) in enumerate(zip(calls_o, calls_s)) if _ck(a) != _ck(b)), None)
    if parted is None and len(calls_o) != len(calls_s):
        parted = min(len(calls_o), len(calls_s))
    first = None
    if parted is not None:
        first = {"original": _at(calls_o, parted), "shadow": _at(calls_s, parted)}
    recorded_departure, departure = _departed(mine)
    answer_diff = "\n".join(
        difflib.unified_diff(
            (theirs.answer or "").splitlines(), (mine.answer or "").splitlines(), "original", "shadow", lineterm=""
        )
    )
    output_diff = _fields(theirs.output, mine.output)
    same = parted is None and not answer_diff and not output_diff and theirs.phase == mine.phase
    diverged_at = recorded_departure
    if diverged_at is None and first is not None:
        diverged_at = (first["shadow"] or first["original"]).step  # type: ignore[union-attr]  # one is set
    return RunDiff(
        original=_side(theirs),
        shadow=_side(mine),
        same=same and recorded_departure is None,
        complete=mine.phase.terminal and mine.phase != Phase.BUDGET_EXHAUSTED,
        diverged_at=diverged_at,
        departure=departure,
        first_divergent_call=first,
        answer_diff=answer_diff,
        output_diff=output_diff,
        quarantined=[c for c in calls_s if c.shadow is not None],
    )


def _calls(state: AgentState, after: int = 0) -> list[Call]:
    return [
        Call(step=r.step, tool=r.tool, arguments=canonical(r.arguments), shadow=r.shadow)
        for r in state.calls.tool_calls.items
        if r.step > after
    ]


def _from_step(shadow: AgentState, original: AgentState) -> int:
    """The step of the original's checkpoint a shadow started from (0: from the start): the
    original's calls before it are not the shadow's to repeat."""
    source = shadow.run.resume_from
    if source is None or source.workflow_id != original.workflow_id:
        return 0
    found = next((c for c in original.effects.checkpoints.items if c.id == source.checkpoint_id), None)
    return found.step if found is not None else 0


def _ck(call: Call) -> tuple[str, str]:
    return call.tool, call.arguments


def _at(calls: list[Call], i: int) -> Call | None:
    return calls[i] if i < len(calls) else None


def _departed(state: AgentState) -> tuple[int | None, str]:
    """The step at which a `recorded` shadow met a prompt its original never sent, or (`--bisect`)
    its candidate replied otherwise, and why."""
    error = state.last_error or ""
    found = re.search(r"shadow diverged at step (\d+): ?(.*)", error, re.DOTALL)
    if found is None and ErrorType.SHADOW_DIVERGED not in error:
        return None, ""
    return (int(found.group(1)), found.group(2).strip()) if found else (state.step, error)


def _fields(a: Any, b: Any) -> dict[str, list[Any]]:
    if a == b:
        return {}
    if isinstance(a, dict) and isinstance(b, dict):
        return {k: [a.get(k), b.get(k)] for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)}
    return {"(output)": [a, b]}


def _side(state: AgentState) -> Side:
    used = state.used
    verified = None
    if state.plan is not None and state.plan.verifier is not None:
        checkpoints = state.effects.checkpoints.items
        verified = bool(checkpoints) and checkpoints[-1].verified
    return Side(
        workflow_id=state.workflow_id,
        phase=state.phase.value,
        steps=state.step,
        tokens=used.prompt_tokens + used.completion_tokens,
        cost_usd=used.cost_usd,
        answer=state.answer,
        output=state.output,
        verified=verified,
    )


def totals(diffs: list[RunDiff]) -> Totals:
    cost_o = sum(d.original.cost_usd for d in diffs)
    cost_s = sum(d.shadow.cost_usd for d in diffs)
    return Totals(
        runs=len(diffs),
        same=sum(d.same for d in diffs),
        diverged=sum(not d.same for d in diffs),
        verifier_better=sum(d.original.verified is False and d.shadow.verified is True for d in diffs),
        verifier_worse=sum(d.original.verified is True and d.shadow.verified is False for d in diffs),
        cost_ratio=cost_s / cost_o if cost_o > 0 else (1.0 if cost_s == 0 else float("inf")),
        quarantined=sum(len(d.quarantined) for d in diffs),
        incomplete=sum(not d.complete for d in diffs),
    )


_CRITERION = re.compile(r"^\s*([a-z_]+)\s*(<=|>=|<|>|==)\s*(\d+(?:\.\d*)?)\s*$")
_OPS = {"<=": operator.le, ">=": operator.ge, "<": operator.lt, ">": operator.gt, "==": operator.eq}


def parse_fail_if(text: str) -> list[tuple[str, str, float]]:
    """`verifier_worse>0, cost_ratio>1.2` as (term, op, number); ValueError naming what does not parse."""
    found = []
    for part in (p for p in text.split(",") if p.strip()):
        match = _CRITERION.match(part)
        if match is None or match.group(1) not in Totals.model_fields:
            terms = ", ".join(Totals.model_fields)
            raise ValueError(f"fail-if criterion {part.strip()!r}: give `term op number`; terms: {terms}")
        found.append((match.group(1), match.group(2), float(match.group(3))))
    if not found:
        raise ValueError("fail-if has no criterion")
    return found


def broken(report: ShadowReport, criteria: list[tuple[str, str, float]]) -> list[str]:
    """The criteria the report meets (each one a reason to fail), as `term=value op number`."""
    figures = report.totals.model_dump()
    return [f"{t}={figures[t]:g} {op} {n:g}" for t, op, n in criteria if _OPS[op](figures[t], n)]


def markdown(report: ShadowReport) -> str:
    t = report.totals
    lines = [
        f"# Shadow batch {report.batch}",
        "",
        "| runs | same | diverged | verifier better | verifier worse | cost ratio | quarantined | incomplete |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
        f"| {t.runs} | {t.same} | {t.diverged} | {t.verifier_better} | {t.verifier_worse} | {t.cost_ratio:.2f}"
        f" | {t.quarantined} | {t.incomplete} |",
    ]
    for diff in report.runs:
        lines += ["", *_run_markdown(diff)]
    return "\n".join(lines) + "\n"


def _run_markdown(d: RunDiff) -> list[str]:
    o, s = d.original, d.shadow
    verdict = "same" if d.same else f"diverged at step {d.diverged_at}"
    lines = [
        f"## {o.workflow_id} -> {s.workflow_id}: {verdict}" + ("" if d.complete else " (incomplete)"),
        "",
        "| | phase | steps | tokens | cost (USD) | verified |",
        "| --- | --- | --- | --- | --- | --- |",
        f"| original | {o.phase} | {o.steps} | {o.tokens} | {o.cost_usd:.4f} | {o.verified} |",
        f"| shadow | {s.phase} | {s.steps} | {s.tokens} | {s.cost_usd:.4f} | {s.verified} |",
    ]
    if d.departure:
        lines.append(f"- departs at step {d.diverged_at}: {d.departure}")
    if d.first_divergent_call:
        for side, call in d.first_divergent_call.items():
            text = f"step {call.step}: `{call.tool}` `{call.arguments[:200]}`" if call else "(no call)"
            lines.append(f"- first divergent call, {side}: {text}")
    for call in d.quarantined:
        lines.append(f"- {call.shadow}: step {call.step} `{call.tool}` `{call.arguments[:200]}`")
    if d.answer_diff:
        lines += ["", "```diff", d.answer_diff, "```"]
    for field, (was, now) in d.output_diff.items():
        lines.append(f"- output `{field}`: {was!r} -> {now!r}")
    return lines
