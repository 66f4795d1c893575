"""Matching a tool call against approval patterns (ratchet/contracts/approval_policy.py): pure
functions, no I/O, no clock, so the workflow runs them (workflows/grants.py).

A pattern's globs and regexes are compiled once per process (an LRU cache keyed by their text:
the same text always compiles the same way, so replay decides the same)."""

from __future__ import annotations

import math
import re
import shlex
from functools import lru_cache
from typing import Any

from ratchet.contracts.approval_policy import GLOB_CHARS, ArgMatch, ToolPattern


def normal_path(value: Any) -> str | None:
    """A relative path with `.` segments and doubled slashes dropped, or None where no glob may
    match it: not a string, empty, absolute, a `..` segment, a backslash, a NUL, a glob character."""
    if not isinstance(value, str) or not value or value.startswith("/") or value[1:3] == ":\\":
        return None
    if "\\" in value or "\x00" in value or any(c in value for c in GLOB_CHARS):
        return None
    segments = [s for s in value.split("/") if s not in ("", ".")]
    if not segments or ".." in segments:
        return None
    return "/".join(segments)


@lru_cache(maxsize=4096)
def glob_regex(glob: str) -> re.Pattern[str]:
    """`*` and `?` within a segment, `**` (a whole segment) any number of segments (none too)."""
    parts = []
    segments = glob.split("/")
    for i, segment in enumerate(segments):
        last = i == len(segments) - 1
        if segment == "**":
            parts.append(".*" if last else "(?:[^/]+/)*")
            continue
        text = "".join("[^/]*" if c == "*" else "[^/]" if c == "?" else re.escape(c) for c in segment)
        parts.append(text if last else text + "/")
    return re.compile("".join(parts), re.DOTALL)


@lru_cache(maxsize=4096)
def compiled(regex: str) -> re.Pattern[str]:
    return re.compile(regex)


def _text(value: Any) -> str | None:
    """A string as it is, a list of strings as a shell would quote it; anything else None."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return shlex.join(value)
    return None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    return None if math.isnan(number) else number


def passes(test: ArgMatch, value: Any) -> bool:
    """Whether one argument's value passes one test (a missing argument never does: `value` is
    then the `MISSING` sentinel)."""
    if value is MISSING:
        return False
    if test.glob is not None:
        path = normal_path(value)
        return path is not None and glob_regex(test.glob).fullmatch(path) is not None
    if test.regex is not None:
        text = _text(value)
        return text is not None and compiled(test.regex).fullmatch(text) is not None
    if test.equals is not None:
        return type(value) is type(test.equals) and value == test.equals
    number = _number(value)
    if number is None:
        return False
    return (
        (test.lt is None or number < test.lt)
        and (test.le is None or number <= test.le)
        and (test.gt is None or number > test.gt)
        and (test.ge is None or number >= test.ge)
    )


MISSING = object()


def covers(pattern: ToolPattern, tool: str, args: dict[str, Any]) -> bool:
    """Whether `pattern` covers a call of `tool` with `args`."""
    if pattern.tool != tool:
        return False
    return all(passes(test, args.get(name, MISSING)) for name, test in pattern.when.items())


def first_covering(patterns: list[ToolPattern], tool: str, args: dict[str, Any]) -> ToolPattern | None:
    """The first of `patterns` that covers the call, or None."""
    for pattern in patterns:
        if covers(pattern, tool, args):
            return pattern
    return None
