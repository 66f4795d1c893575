"""Guardrails: a profile's checks on what comes in, what the agent does and what it answers, each
with a tripwire that says what a match does (workflows/guardrails.py runs them; the matching is
ratchet/core/guardrails.py).

    guardrails=[
        Guardrail(name="no-secrets-out", on="answer", detectors=["secret"], action="redact"),
        Guardrail(name="no-root-deletes", on="tool_call", tool="run_command", patterns=[r"rm\\s+-rf\\s+/"]),
        Guardrail(name="pii-in", on="input", detectors=["email", "credit_card"], action="redact"),
        Guardrail(name="mail-outside", on="tool_call", tool="send_mail", argument="to",
                  patterns=[r"@(?!example\\.com$)"], action="ask"),
    ]

A `json_schema` checks a call's arguments (the object) or the answer (as JSON) instead of text.
`on`: `input` (the objective and every user message, before the model sees it), `tool_call` (a
call's arguments before it runs; `tool` and `argument` narrow it), `answer` (the final answer,
before it is taken). `action`: `stop` the run (it fails with `GuardrailTripped`, after its failure
policy), `ask` a person (a tool call only: the call waits for approval, the guardrail its reason),
or `redact` the matches and go on. Every trip is recorded (`state.guardrails`): which guardrail,
where, what matched (its kind, never the text), and what was done.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from ratchet.contracts.base import NAME_PATTERN, Strict

GuardrailOn = Literal["input", "tool_call", "answer"]
Detector = Literal["secret", "email", "credit_card"]
"""Built-in detectors: `secret` (API keys and tokens of the common forms, private keys, bearer
tokens), `email` (addresses), `credit_card` (13 to 19 digits passing the Luhn check)."""
GuardrailAction = Literal["stop", "ask", "redact"]


class Judge(Strict):
    """A model that judges the text (an activity: `guardrail.judge`, its own idempotency key, its
    usage charged to the run's budget): asked `question` about it, it answers PASS or FAIL, then why."""

    provider: str = Field(pattern=NAME_PATTERN)
    model: str | None = None
    options: dict[str, Any] = Field(default_factory=dict)
    question: str = Field(min_length=1, description="e.g. 'Does this answer promise a refund?'")


class Guardrail(Strict):
    name: str = Field(pattern=NAME_PATTERN)
    on: GuardrailOn
    patterns: list[str] = Field(default_factory=list)
    """Regular expressions (Python's `re`, searched anywhere in the text)."""
    detectors: list[Detector] = Field(default_factory=list)
    json_schema: dict[str, Any] | None = None
    """`tool_call`: the call's arguments must match this JSON Schema; `answer`: the answer must be
    JSON that matches it (checked where the run is planned: a schema that does not compile is refused)."""
    judge: Judge | None = None
    """`tool_call` (the arguments as JSON) or `answer`: a model's verdict; FAIL trips the guardrail."""
    action: GuardrailAction = "stop"
    tool: str = "*"
    """`tool_call`: the tool it checks (`*`: every tool)."""
    argument: str | None = None
    """`tool_call`: the argument it checks (None: every string in the arguments)."""

    @field_validator("patterns")
    @classmethod
    def _compiles(cls, patterns: list[str]) -> list[str]:
        for pattern in patterns:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"pattern {pattern!r} does not compile: {exc}") from None
        return patterns

    @model_validator(mode="after")
    def _sensible(self) -> Guardrail:
        if not self.patterns and not self.detectors and self.json_schema is None and self.judge is None:
            raise ValueError(f"guardrail {self.name!r}: give patterns, detectors, a json_schema or a judge")
        whole = [name for name in ("json_schema", "judge") if getattr(self, name) is not None]
        if whole and self.on == "input":
            raise ValueError(f"guardrail {self.name!r}: a {whole[0]} checks a tool call or the answer, not the input")
        if whole and self.action == "redact":
            raise ValueError(f"guardrail {self.name!r}: a {whole[0]} finds no text to redact: stop or ask")
        if self.action == "ask" and self.on != "tool_call":
            raise ValueError(f"guardrail {self.name!r}: `ask` is for tool calls (a call waits for approval)")
        if self.on != "tool_call" and (self.tool != "*" or self.argument is not None):
            raise ValueError(f"guardrail {self.name!r}: tool and argument are for `on: tool_call`")
        return self


class GuardrailTrip(BaseModel):
    """A guardrail that matched, recorded in `state.guardrails`."""

    guardrail: str
    on: GuardrailOn
    step: int
    where: str
    """`objective`, `message 3`, `create_ticket call_1_0 (title)`, `answer`."""
    found: list[str]
    """What matched, by kind: `pattern 're'`, `email`, ... (never the matched text)."""
    action: GuardrailAction
    at: str = ""
