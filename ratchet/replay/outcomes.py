"""A replayed history's verdict: `ok`, NONDETERMINISTIC, FAILED or ERROR, and where it diverged."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

OK, NONDETERMINISTIC, FAILED, ERROR = "ok", "NONDETERMINISTIC", "FAILED", "ERROR"
Progress = Callable[[str], None]
"""Where a replay reports what it is doing, one line at a time."""


@dataclass
class Outcome:
    """One history's verdict. `divergence` is in agent terms; `detail` is the reason, one line."""

    workflow_id: str
    source: str
    events: int = 0
    result: str = OK
    divergence: str = ""
    detail: str = ""
