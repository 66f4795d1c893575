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

`on`: `input` (the objective and every user message, before the model sees it), `tool_call` (a
call's arguments before it runs; `tool` and `argument` narrow it), `answer` (the final answer,
before it is taken). `action`: `stop` the run (it fails with `GuardrailTripped`, after its failure
policy), `ask` a person (a tool call only: the call waits for approval, the guardrail its reason),
or `redact` the matches and go on. Every trip is recorded (`state.guardrails`): which guardrail,
where, what matched (its kind, never the text), and what was done.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from ratchet.contracts.base import NAME_PATTERN, Strict

GuardrailOn = Literal["input", "tool_call", "answer"]
Detector = Literal["secret", "email", "credit_card"]
"""Built-in detectors: `secret` (API keys and tokens of the common forms, private keys, bearer
tokens), `email` (addresses), `credit_card` (13 to 19 digits passing the Luhn check)."""
GuardrailAction = Literal["stop", "ask", "redact"]


class Guardrail(Strict):
    name: str = Field(pattern=NAME_PATTERN)
    on: GuardrailOn
    patterns: list[str] = Field(default_factory=list)
    """Regular expressions (Python's `re`, searched anywhere in the text)."""
    detectors: list[Detector] = Field(default_factory=list)
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
        if not self.patterns and not self.detectors:
            raise ValueError(f"guardrail {self.name!r}: give patterns or detectors (or both)")
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
