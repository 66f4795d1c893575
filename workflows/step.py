"""One step of the loop: THINK, ACT, VERIFY (deterministic, no I/O).

THINKING is one model call (activity `model.call`): it gets only the messages the model has not
seen (`state.conversation.unsent` on) and the digest of the transcript it keeps in the artifact store, and
refuses or caps a call that would not fit in what is left of the token or cost budget. ACTING runs
the reply's tool calls (workflows/acting.py). A step that changed something is verified
(workflows/checkpoints.py); a final answer is taken only when it is whole and, under a verifier,
when the workspace as it stands passed it.
"""

from __future__ import annotations

from temporalio.exceptions import ActivityError, ApplicationError

from ratchet.contracts import (
    AgentState,
    EffectClass,
    ErrorType,
    Message,
    ModelReply,
    ModelRequest,
    ModelSettings,
    Phase,
    RunPlan,
)
from ratchet.contracts.activities import MODEL_CALL, Retry
from ratchet.core import budget as budgets
from . import acting, calls, checkpoints, events, guardrails, sessions
from .errors import FailRun, cause, raise_if_cancelled, root, spend_failed
from .phases import Phases

CUT_OFF = (
    "Your last reply was cut off at the output token limit, so it is not taken as your final answer. "
    "Continue, more briefly: give the final answer in a shorter reply, or call a tool."
)


class OutOfBudget(Exception):
    """The next model call cannot fit in what is left of the token or cost budget (the model
    activity refused it before calling the model)."""


class TurnOutOfBudget(OutOfBudget):
    """As `OutOfBudget`, for a session turn's own token budget: the turn ends, the session goes on."""


async def step(state: AgentState, plan: RunPlan, phases: Phases, stream: events.RunStream) -> str | None:
    """The final answer, or None to go on. The loop races it against what may stop it."""
    reply = await think(state, plan, phases)
    events.rest_of(stream, state.step, reply)  # what of the reply the model call did not stream
    if not reply.message.tool_calls:
        if reply.finish_reason == "length":
            state.conversation.messages.append(Message(role="user", content=CUT_OFF))  # cut off: never a final answer
            return None
        if reply.output_error is not None:  # the answer does not match the output schema: back to the model
            refuse_answer(state, plan, reply.output_error)
            return None
        state.output = reply.output
        # under a verifier the workspace as it stands must pass; a failing check goes back to the
        # model (it cannot end DONE)
        if plan.verifier is None or checkpoints.verified(state) or await checkpoints.verify(state, plan, phases):
            return await guardrails.check_answer(state, plan, reply.message.content or "", stream)
        return None
    effects_before = state.effects.count
    await acting.act(state, plan, reply.message.tool_calls, phases, stream)
    changed = any(e.effect == EffectClass.COMPENSABLE for e in state.effects.stack.since(effects_before))
    if plan.verifier is not None and changed:
        await checkpoints.verify(state, plan, phases)
    return None


def refuse_answer(state: AgentState, plan: RunPlan, problem: str) -> None:
    """A final answer that does not match the run's output schema goes back to the model, counted
    with the bad tool calls (the same limit, `max_bad_tool_calls`)."""
    acting.count_bad_call(state, f"the final answer does not match the output schema: {problem}")
    state.conversation.messages.append(
        Message(role="user", content=f"{state.last_error}. Give your final answer again, matching it.")
    )
    if state.calls.bad_tool_calls > plan.max_bad_tool_calls:
        raise FailRun(
            f"the model made {state.calls.bad_tool_calls} invalid tool calls or answers "
            f"(limit {plan.max_bad_tool_calls}); last: {state.last_error}"
        )


async def think(state: AgentState, plan: RunPlan, phases: Phases) -> ModelReply:
    """The model's reply to the conversation so far, added to it and charged to the budget."""
    phases.enter(state, Phase.THINKING, plan)
    guardrails.check_input(state, plan)  # before the model sees them
    unsent = state.conversation.unsent_messages()
    choices = [plan.model, *plan.fallbacks]
    for choice, settings in enumerate(choices):
        tokens_left, cost_left = budgets.allowance(plan.budget, state.used)  # after the models before it
        turn_left = sessions.turn_tokens_left(state)
        by_turn = turn_left is not None and turn_left < tokens_left
        tokens_left = turn_left if turn_left is not None and by_turn else tokens_left
        request = ModelRequest(
            step=state.step,
            call_ref=plan.call_ref,
            transcript=state.conversation.transcript,
            new_messages=unsent,
            max_tokens=tokens_left,
            max_cost_usd=cost_left,  # the activity refuses or caps a call (or a retry) that would not fit
            choice=choice,
        )
        try:
            reply = await _call_model(state, request, settings, choice, plan)
            break
        except ActivityError as err:
            raise_if_cancelled(err)
            spend_failed(state.used, err)  # the attempts that failed were paid for all the same
            failure = root(err)
            if isinstance(failure, ApplicationError) and failure.type == ErrorType.BUDGET_EXHAUSTED:
                raise (
                    TurnOutOfBudget(f"turn {failure.message}") if by_turn else OutOfBudget(failure.message)
                ) from None
            if choice + 1 == len(choices) or (isinstance(failure, ApplicationError) and failure.non_retryable):
                raise FailRun(f"step {state.step}: model call failed: {cause(err)}") from None
            # the model kept failing with retryable errors: the same step's call on the next model
    state.used.steps += 1
    budgets.charge(state.used, reply.usage, choices[choice], reply.billed)
    state.conversation.messages.append(reply.message)
    state.conversation.context_tokens = reply.usage.total_tokens  # what a session's compaction watches
    state.conversation.seen(reply.transcript)
    return reply


async def _call_model(state: AgentState, request: ModelRequest, settings: ModelSettings, choice: int, plan: RunPlan):
    """One model's attempts at a step's call: all of its attempts for the last model of the run, at
    most the plan's `fallback_after_attempts` for one with a fallback after it."""
    last = choice == len(plan.fallbacks)
    where = "model call" if choice == 0 else f"model call on fallback {choice} ({settings.provider}/{settings.model})"
    return await calls.call(
        MODEL_CALL,
        request,
        summary=f"step {state.step}: {where}",
        start_to_close_s=settings.timeout_s + 30,
        retry=Retry(
            initial_s=MODEL_CALL.retry.initial_s,
            maximum_s=settings.retry_max_interval_s,
            maximum_attempts=settings.max_attempts
            if last
            else min(settings.max_attempts, plan.fallback_after_attempts),
        ),
        task_queue=settings.task_queue,  # the provider's rate-limited queue, or (None) the run's
    )
