"""Policies instead of clicks: what spares a person an approval (ratchet/core/approval_rules.py
matches them; workflows/grants.py keeps the grants).

One syntax for all three, a `ToolPattern`: a tool and, per argument, one test of its value.

    auto_approve=[
        {"tool": "write_file", "when": {"path": {"glob": "docs/**"}}},
        {"tool": "run_command", "when": {"argv": {"regex": "pytest( .*)?"}}},
        {"tool": "refund", "when": {"amount": {"lt": 100}}},
    ]

- `glob`: a relative path. `*` and `?` stay inside one path segment, `**` (a whole segment) spans
  any number of them. The call's path is normalised first (`.` segments and doubled slashes
  dropped); a path that is absolute, has a `..` segment, a backslash, a NUL or a glob character
  matches no glob, so `docs/../secrets`, `/etc/passwd` or a file literally named `docs/**` ask.
- `regex`: full-match (`re.fullmatch`: the whole value, as if between `^` and `$`) over a string,
  or over a list of strings joined as a shell would quote them (`shlex.join`), so one element
  holding `; rm -rf ~` cannot pass for a separate word.
- `lt`, `le`, `gt`, `ge`: a number (not a bool, not a numeric string) within the bounds given.
- `equals`: the value exactly.

An argument a pattern names must be present; arguments it does not name are not looked at. A rule
(`RunPolicy.auto_approve`) approves a call a profile rule or irreversibility would have asked a
person for; a guardrail's `ask` still asks. A `Grant` is the same patterns for a time, given by a
person: with an approval (`approve(call_id, grant=GrantRequest(...))`), or by approving an
agent's proposed plan (the `propose_plan` tool: its `calls` become one grant, its envelope).
"""

from __future__ import annotations

import re
from pydantic import BaseModel, Field, field_validator, model_validator

GLOB_CHARS = "*?["
ARG_NAME = r"^[A-Za-z_][A-Za-z0-9_]{0,99}$"


class ArgMatch(BaseModel, extra="forbid"):
    """One test of one argument's value: a glob, a regex, bounds, or a value (exactly one kind)."""

    glob: str | None = None
    regex: str | None = None
    lt: float | None = None
    le: float | None = None
    gt: float | None = None
    ge: float | None = None
    equals: str | int | float | bool | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> ArgMatch:
        bounds = any(b is not None for b in (self.lt, self.le, self.gt, self.ge))
        kinds = [self.glob is not None, self.regex is not None, bounds, self.equals is not None]
        if sum(kinds) != 1:
            raise ValueError("give exactly one of glob, regex, equals, or bounds (lt, le, gt, ge)")
        return self

    @field_validator("glob")
    @classmethod
    def _glob(cls, value: str | None) -> str | None:
        if value is None:
            return None
        segments = value.split("/")
        if not value or value.startswith("/") or "\\" in value or "\x00" in value:
            raise ValueError(f"glob {value!r}: a relative path with / between segments")
        if any(s in ("", ".", "..") for s in segments):
            raise ValueError(f"glob {value!r}: empty, '.' or '..' segments never match a normalised path")
        if any("**" in s and s != "**" for s in segments) or "[" in value:
            raise ValueError(f"glob {value!r}: '**' must be a whole segment; '[' is not supported")
        return value

    @field_validator("regex")
    @classmethod
    def _regex(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"regex {value!r} does not compile: {exc}") from None
        return value

    def label(self) -> str:
        if self.glob is not None:
            return self.glob
        if self.regex is not None:
            return f"~{self.regex}"
        if self.equals is not None:
            return repr(self.equals)
        ops = (("<", self.lt), ("<=", self.le), (">", self.gt), (">=", self.ge))
        return ",".join(f"{op}{bound:g}" for op, bound in ops if bound is not None)


class ToolPattern(BaseModel, extra="forbid"):
    """Calls of `tool` whose arguments pass every test of `when` (none: every call of it)."""

    tool: str = Field(min_length=1, max_length=200)
    when: dict[str, ArgMatch] = Field(default_factory=dict)

    @field_validator("when")
    @classmethod
    def _names(cls, value: dict[str, ArgMatch]) -> dict[str, ArgMatch]:
        bad = [name for name in value if not re.match(ARG_NAME, name)]
        if bad:
            raise ValueError(f"argument names {bad} are not identifiers")
        return value

    def label(self) -> str:
        """`write_file path=docs/**`: how a decision's `by` names it."""
        return " ".join([self.tool, *(f"{name}={test.label()}" for name, test in sorted(self.when.items()))])


class GrantRequest(BaseModel, extra="forbid"):
    """What a person grants with an approval: later calls of these patterns run without asking,
    in this run, for `for_s` seconds of workflow time. No patterns: every call of the approved
    call's tool."""

    for_s: float = Field(gt=0, le=366 * 24 * 3600)
    patterns: list[ToolPattern] = Field(default_factory=list, max_length=100)


class Grant(BaseModel):
    """A grant in force in a run (`state.calls.grants`): kept across continue-as-new, scoped to
    the run, spent on nothing (any number of calls), void after `expires_at`."""

    id: str
    patterns: list[ToolPattern]
    expires_at: str
    """The workflow time it ends (ISO 8601)."""
    by: str
    """Who granted it (the approving person)."""
    granted_at: str
    source: str
    """The call whose approval carried it (`call_3_0`), or `plan call_3_0` for an approved plan's envelope."""


class PlanArgs(BaseModel):
    """The `propose_plan` tool's arguments: the calls the agent means to make, as patterns; a
    person approves them as one grant (the envelope), and a call outside it asks again."""

    summary: str = Field(min_length=1, max_length=10_000, description="What the plan does, for the person.")
    calls: list[ToolPattern] = Field(
        min_length=1,
        max_length=50,
        description=(
            'The calls the plan makes, e.g. {"tool": "write_file", "when": {"path": {"glob": "docs/**"}}}; '
            "tests per argument: glob, regex (full match), equals, lt/le/gt/ge."
        ),
    )
    for_s: float = Field(3600, gt=0, le=7 * 24 * 3600, description="How long the approval lasts, in seconds.")
