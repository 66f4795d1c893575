"""Guardrails: a profile's checks with tripwires, run where each belongs (deterministic, no I/O).

The matching is pure (ratchet/core/guardrails.py), so every check runs here in the workflow,
between events, costing no activity:

- `input`: the user messages the model has not seen yet (the objective, messages sent, a session's
  turns), just before the model call that would send them (workflows/step.py `think`);
- `tool_call`: a call's top-level string arguments once parsed, before its approval and before it
  runs (workflows/acting.py); `ask` makes the call wait for approval with the guardrail as its reason;
- `answer`: the final answer, before it is taken (workflows/step.py). Its text was streamed as the
  model wrote it: a trip publishes `Withdrawn`, and the run's answer (`RunEnded`, the result) is
  the redacted text, or none.

A `stop` fails the run with `GuardrailTripped` after its failure policy; `redact` replaces what
matched with `[redacted: NAME]` and goes on. Every trip is kept in `state.guardrails`, naming what
matched by kind, never the text.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError

from ratchet.contracts import AgentState, ErrorType, Guardrail, GuardrailTrip, RunPlan
from ratchet.contracts.activities import GUARDRAIL_JUDGE
from ratchet.contracts.events import MODEL_CALL, Withdrawn
from ratchet.contracts.judging import JudgeRequest
from ratchet.core import budget as budgets
from ratchet.core import guardrails as matching

from . import calls
from .errors import FailRun, spend_failed
from .events import RunStream


def check_input(state: AgentState, plan: RunPlan) -> None:
    """The unsent user messages, before the model sees them: redacted in place, or the run stops."""
    rules = [g for g in plan.guardrails if g.on == "input"]
    if not rules:
        return
    messages = state.conversation.messages
    for index in range(state.conversation.unsent, messages.end):
        message = messages.at(index)
        if message.role != "user" or not message.content or message.summary:
            continue
        where = "objective" if index == 1 else f"message {index}"
        text = message.content
        for rule in rules:
            text = _apply(state, rule, text, where)
        if text != message.content:
            messages.items[messages.local(index)] = message.model_copy(update={"content": text})
            if where == "objective" and state.run.objective == message.content:  # as the state shows the run
                state.run = state.run.model_copy(update={"objective": text})
            for turn in state.session.turns.items:  # a session's turn shows its question as the model saw it
                if turn.first_message == index:
                    turn.question = text


async def check_call(
    state: AgentState, plan: RunPlan, tool: str, call_id: str, args: dict[str, Any], text: str
) -> tuple[dict[str, Any], str, str | None]:
    """A call's arguments and their text (`text` as the model wrote them), redacted where a
    guardrail says so, and the reason it must wait for a person (an `ask` guardrail matched), or
    None; a `stop` guardrail stops the run. Every string in the arguments is checked, nested in
    objects and lists too (named by its path: `files[0].content`)."""
    given, ask = args, None
    for rule in plan.guardrails:
        if rule.on != "tool_call" or rule.tool not in ("*", tool):
            continue
        problem = matching.schema_problem(rule, args) or await _judged(state, plan, rule, call_id, text)
        if problem is not None:
            ask = _whole_trip(state, rule, f"{tool} {call_id}", problem) or ask
        asked: list[str] = []

        def check(path: str, value: str, rule: Guardrail = rule) -> str:
            where = f"{tool} {call_id} ({path})"
            if rule.action != "ask":
                return _apply(state, rule, value, where)
            found = matching.findings(rule, value)
            if found:
                _record(state, rule, where, matching.kinds(found))
                asked.append(f"guardrail {rule.name}: {', '.join(matching.kinds(found))} in {path}")
            return value

        for name in [rule.argument] if rule.argument is not None else sorted(args):
            if name in args:
                args = {**args, name: _strings(args[name], name, check)}
        ask = ask or (asked[0] if asked else None)
    return args, text if args == given else json.dumps(args), ask


def _strings(value: Any, path: str, check: Callable[[str, str], str]) -> Any:
    """`value` with each string in it (at any depth) replaced by `check(its path, it)`."""
    if isinstance(value, str):
        return check(path, value)
    if isinstance(value, dict):
        return {key: _strings(item, f"{path}.{key}", check) for key, item in value.items()}
    if isinstance(value, list):
        return [_strings(item, f"{path}[{index}]", check) for index, item in enumerate(value)]
    return value


async def check_answer(state: AgentState, plan: RunPlan, answer: str, stream: RunStream) -> str:
    """The final answer as the run takes it: redacted, or the run stops (the streamed text withdrawn)."""
    for rule in (g for g in plan.guardrails if g.on == "answer"):
        try:
            if rule.json_schema is not None:
                _whole_trip(state, rule, "answer", _answer_problem(rule, answer))
            _whole_trip(state, rule, "answer", await _judged(state, plan, rule, "answer", answer))
            taken = _apply(state, rule, answer, "answer")
        except FailRun:
            stream.publish(Withdrawn(step=state.step, call=MODEL_CALL, guardrail=rule.name, action="stop"))
            raise
        if taken != answer:
            stream.publish(Withdrawn(step=state.step, call=MODEL_CALL, guardrail=rule.name, action="redact"))
            answer = taken
    return answer


async def _judged(state: AgentState, plan: RunPlan, rule: Guardrail, call: str, text: str) -> str | None:
    """A judge guardrail's verdict on `text` (its usage charged to the run): why it failed, or None."""
    if rule.judge is None:
        return None
    settings = plan.judges[rule.name]
    request = JudgeRequest(
        guardrail=rule.name, step=state.step, call=call, settings=settings, question=rule.judge.question, text=text
    )
    judged = call if call == "answer" else "call " + call
    try:
        verdict = await calls.call(
            GUARDRAIL_JUDGE,
            request,
            summary=f"step {state.step}: guardrail {rule.name} judges the {judged}",
            start_to_close_s=settings.timeout_s + 30,
        )
    except ActivityError as err:  # the judge's failed attempts were paid for all the same
        spend_failed(state.used, err)
        raise
    budgets.charge(state.used, verdict.usage, settings, verdict.billed)
    return None if verdict.passed else f"judge: {verdict.reason}"


def _whole_trip(state: AgentState, rule: Guardrail, where: str, problem: str | None) -> str | None:
    """A schema or judge guardrail that failed: the run stops, or (ask) the reason the call waits."""
    if problem is None:
        return None
    _record(state, rule, where, [problem])
    if rule.action == "stop":
        raise FailRun(f"guardrail {rule.name} tripped on {where}: {problem}", error_type=ErrorType.GUARDRAIL_TRIPPED)
    return f"guardrail {rule.name}: {problem}"


def _answer_problem(rule: Guardrail, answer: str) -> str | None:
    try:
        value = json.loads(answer)
    except ValueError:
        return "schema: the answer is not JSON"
    return matching.schema_problem(rule, value)


def _apply(state: AgentState, rule: Guardrail, text: str, where: str) -> str:
    found = matching.findings(rule, text)
    if not found:
        return text
    _record(state, rule, where, matching.kinds(found))
    if rule.action == "stop":
        raise FailRun(
            f"guardrail {rule.name} tripped on {where}: {', '.join(matching.kinds(found))}",
            error_type=ErrorType.GUARDRAIL_TRIPPED,
        )
    return matching.redacted(text, found, rule.name)


def _record(state: AgentState, rule: Guardrail, where: str, found: list[str]) -> None:
    state.guardrails.append(
        GuardrailTrip(
            guardrail=rule.name,
            on=rule.on,
            step=state.step,
            where=where,
            found=found,
            action=rule.action,
            at=workflow.now().isoformat(),
        )
    )
