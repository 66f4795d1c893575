"""The recorded provider: a shadow run's model answered with its original's recorded replies.

`ratchet shadow --model recorded` starts each shadow with `{"provider": "recorded", "options":
{"transcript": DIGEST}}`, DIGEST the original's transcript. A call is answered with the original's
reply number `turn` (the assistant messages before it) while what the shadow sends is what the
original sent before that reply, message for message (role, text or the artifact it names, tool calls,
the call it answers). When it is not (a changed system prompt, a tool that now answers otherwise),
the shadow has diverged: the call fails non-retryably (`ShadowDiverged`, naming the step and the
first message that differs) and the run stops there. Usage is counted as the scripted provider
counts it, so the shadow of a scripted run spends what the original did.

`--bisect` adds `"candidate": {"provider", "model", "options"}`: each call is also put to the
candidate (another provider of the worker, planned with the run), and while its reply is the
original's (the same tool calls with canonical arguments, or the same final text) the shadow goes on
with the recorded reply, spending what the candidate spent. At the first reply that differs the call
fails the same way, naming the step and both replies: the first step at which the candidate departs.
"""

from __future__ import annotations

import dataclasses
import json
from collections import OrderedDict
from typing import Any

from pydantic import Field
from temporalio.exceptions import ApplicationError

from ratchet.contracts import ErrorType, Message, ModelSettings, Strict
from ratchet.models.provider import (
    Completion,
    ModelCall,
    ModelProvider,
    PlanContext,
    ProviderOptionsError,
    ProviderRegistry,
    check_options,
)
from ratchet.models.scripted import _usage, scripted_summary
from ratchet.stores.artifacts import ArtifactMissing, ArtifactStore
from ratchet.stores.transcripts import HEAD, read_all

TRANSCRIPTS_CACHED = 64


class CandidateModel(Strict):
    """`--bisect`'s candidate: a provider of the worker, its model and options."""

    provider: str = Field(min_length=1, max_length=100)
    model: str | None = Field(default=None, max_length=200)
    options: dict[str, Any] = Field(default_factory=dict)


class RecordedOptions(Strict):
    transcript: str = Field(min_length=1, max_length=200, description="The original run's transcript digest.")
    candidate: CandidateModel | None = Field(default=None, description="`--bisect`: the model asked beside.")


class RecordedProvider:
    name = "recorded"
    default_model = "recorded"

    def __init__(self, artifacts: ArtifactStore, registry: ProviderRegistry | None = None) -> None:
        self.artifacts, self.registry = artifacts, registry
        self.transcripts: OrderedDict[str, list[Message]] = OrderedDict()

    def plan(self, settings: ModelSettings, options: dict[str, Any], context: PlanContext) -> ModelSettings:
        given = check_options(RecordedOptions, options)
        try:
            read_all(context.artifacts, given.transcript)
        except (ArtifactMissing, ValueError, OSError) as exc:
            raise ProviderOptionsError("transcript", f"cannot read transcript {given.transcript[:12]}: {exc}") from None
        planned: dict[str, Any] = {"transcript": given.transcript}
        if given.candidate is not None:
            planned["candidate"] = self._plan_candidate(settings, given.candidate, context).model_dump()
        return settings.model_copy(update={"options": planned})

    def _plan_candidate(self, settings: ModelSettings, given: CandidateModel, context: PlanContext) -> ModelSettings:
        """The candidate's settings as its own provider plans them (the run's limits and prices kept)."""
        provider = self._provider(given.provider)
        if provider is None or provider is self:
            known = ", ".join(sorted(n for n in (self.registry.providers if self.registry else {}) if n != self.name))
            raise ProviderOptionsError("candidate", f"unknown provider {given.provider!r}; this worker has: {known}")
        base = settings.model_copy(
            update={"provider": given.provider, "model": given.model or provider.default_model, "options": {}}
        )
        try:
            planned = provider.plan(base, given.options, context)
        except ProviderOptionsError as exc:
            raise ProviderOptionsError(
                f"candidate.options.{exc.option}" if exc.option else "candidate", str(exc)
            ) from None
        problem = provider.unavailable(planned)
        if problem is not None:
            raise ProviderOptionsError("candidate", problem)
        return planned

    def _provider(self, name: str) -> ModelProvider | None:
        return self.registry.get(name) if self.registry is not None else None

    def unavailable(self, settings: ModelSettings) -> str | None:
        if "transcript" not in settings.options:
            return "the recorded provider needs options.transcript (the original run's transcript digest)"
        return None

    async def complete(self, call: ModelCall) -> Completion:
        if call.summary:
            message = Message(role="assistant", content=scripted_summary(call.messages))
            return Completion(message=message, usage=_usage(call.messages, message))
        original = self._transcript(call.settings.options["transcript"])
        reply_at = _reply_index(original, call.turn)
        if reply_at is None:
            raise _diverged(call, f"the original made {call.turn} model calls; this is one more")
        departs = first_difference(call.messages, original[:reply_at])
        if departs is not None:
            raise _diverged(call, departs)
        message = original[reply_at].model_copy(update={"answered_by": ""})
        if "candidate" in call.settings.options:
            return await self._bisect(call, message)
        return Completion(message=message, usage=_usage(call.messages, message), model="recorded")

    async def _bisect(self, call: ModelCall, recorded: Message) -> Completion:
        """The candidate asked the same call: the recorded reply while the candidate's is the same,
        else the departure (non-retryable) naming both."""
        settings = ModelSettings.model_validate(call.settings.options["candidate"])
        provider = self._provider(settings.provider)
        if provider is None:
            raise ApplicationError(
                f"recorded: the candidate's provider {settings.provider!r} is gone", non_retryable=True
            )
        asked = await provider.complete(dataclasses.replace(call, settings=settings, deltas=None))
        if _reply(asked.message) != _reply(recorded):
            why = f"the candidate replied {_brief(asked.message)!r} where the original replied {_brief(recorded)!r}"
            raise _diverged(call, why)
        return Completion(message=recorded, usage=asked.usage, model=asked.model or settings.model)

    def _transcript(self, digest: str) -> list[Message]:
        found = self.transcripts.get(digest)
        if found is None:
            found = self.transcripts[digest] = read_all(self.artifacts, digest)
            while len(self.transcripts) > TRANSCRIPTS_CACHED:
                self.transcripts.popitem(last=False)
        self.transcripts.move_to_end(digest)
        return found


def _reply_index(messages: list[Message], turn: int) -> int | None:
    """Where the original's assistant message number `turn` is (None: it has no such reply)."""
    seen = 0
    for i, message in enumerate(messages):
        if message.role == "assistant":
            if seen == turn:
                return i
            seen += 1
    return None


def first_difference(sent: list[Message], recorded: list[Message]) -> str | None:
    """Why `sent` is not what the original sent (`recorded`, the whole conversation before its
    reply), or None. A windowed call (`context_messages`) sends the head and the latest messages; a
    shadow from a checkpoint (a fork) repeats the objective after the checkpoint's messages, pinned,
    which the original never sent (a session's fork asks the next turn's question there: that one the
    original sent): it is left out when the prompt differs with it."""
    differs = _first_difference(sent, recorded)
    if differs is None:
        return None
    without = sent[:HEAD] + [m for m in sent[HEAD:] if not (m.pinned and m.role == "user")]
    if len(without) < len(sent) and _first_difference(without, recorded) is None:
        return None
    return differs


def _first_difference(sent: list[Message], recorded: list[Message]) -> str | None:
    if len(sent) == len(recorded):
        pairs = list(enumerate(zip(sent, recorded)))
    elif HEAD <= len(sent) < len(recorded):
        tail = len(sent) - HEAD
        places = [*range(HEAD), *range(len(recorded) - tail, len(recorded))]
        pairs = [(at, (sent[i], recorded[at])) for i, at in enumerate(places)]
    else:
        return f"the prompt has {len(sent)} messages, the original's had {len(recorded)}"
    for at, (mine, theirs) in pairs:
        if _key(mine) != _key(theirs):
            return f"message {at} ({theirs.role}) differs: {_brief(mine)!r} where the original had {_brief(theirs)!r}"
    return None


def _key(message: Message) -> tuple:
    text = message.content_ref.digest if message.content_ref is not None else (message.content or "")
    calls = [(c.name, _canonical(c.arguments), c.id) for c in message.tool_calls]
    return message.role, text, calls, message.tool_call_id or ""


def _reply(message: Message) -> tuple:
    """What `--bisect` compares: the tool calls (name, canonical arguments), else the final text."""
    if message.tool_calls:
        return "calls", [(c.name, _canonical(c.arguments)) for c in message.tool_calls]
    return "text", (message.content or "").strip()


def _canonical(arguments: str) -> str:
    try:
        return json.dumps(json.loads(arguments or "{}"), sort_keys=True)
    except ValueError:
        return arguments


def _brief(message: Message) -> str:
    if message.tool_calls:
        return ", ".join(f"{c.name}({c.arguments[:60]})" for c in message.tool_calls)
    return (message.content or "")[:80]


def _diverged(call: ModelCall, why: str) -> ApplicationError:
    return ApplicationError(
        f"shadow diverged at step {call.step}: {why}",
        {"step": call.step},
        type=ErrorType.SHADOW_DIVERGED,
        non_retryable=True,
    )
