"""What a guardrail finds in a text, and the text with it redacted (pure: the workflow runs it).

Patterns are the profile's regular expressions; the detectors are fixed ones (ratchet/contracts/
guardrails.py): the common forms of API keys and tokens, private keys, bearer tokens, e-mail
addresses, and card numbers that pass the Luhn check.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from ratchet.contracts.guardrails import Guardrail
from ratchet.core import outputs

DETECTORS: dict[str, tuple[re.Pattern[str], ...]] = {
    "secret": (
        re.compile(r"\b(?:sk|pk|rk)-[A-Za-z0-9_-]{16,}"),
        re.compile(r"\bsk-ant-[A-Za-z0-9_-]{16,}"),
        re.compile(r"\bAKIA[0-9A-Z]{16}\b"),
        re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}"),
        re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"),
        re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)"),
        re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/-]{20,}=*"),
    ),
    "email": (re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}"),),
    "credit_card": (re.compile(r"\b\d(?:[ -]?\d){12,18}\b"),),
}


@dataclass(frozen=True)
class Finding:
    start: int
    end: int
    kind: str
    """`pattern '...'` or a detector's name."""


def findings(guardrail: Guardrail, text: str) -> list[Finding]:
    """Every match of the guardrail's patterns and detectors in `text`, in order."""
    found = [Finding(m.start(), m.end(), f"pattern {p!r}") for p in guardrail.patterns for m in re.finditer(p, text)]
    for name in guardrail.detectors:
        for pattern in DETECTORS[name]:
            for m in pattern.finditer(text):
                if name != "credit_card" or _luhn(m.group(0)):
                    found.append(Finding(m.start(), m.end(), name))
    return sorted(found, key=lambda f: (f.start, -f.end))


def schema_problem(guardrail: Guardrail, value: object) -> str | None:
    """What in `value` breaks the guardrail's JSON Schema (`schema: PATH: MESSAGE`), or None."""
    if guardrail.json_schema is None:
        return None
    validator = outputs.compiled(json.dumps(guardrail.json_schema, sort_keys=True))
    if isinstance(validator, str):
        return f"schema: does not compile: {validator}"
    from jsonschema.exceptions import best_match

    error = best_match(validator.iter_errors(value))
    if error is None:
        return None
    return f"schema: {'/'.join(str(p) for p in error.absolute_path) or '(the whole)'}: {error.message[:200]}"


def redacted(text: str, found: list[Finding], guardrail: str) -> str:
    """`text` with every finding replaced by `[redacted: GUARDRAIL]` (overlaps merged)."""
    out, at = [], 0
    for f in found:
        if f.end <= at:
            continue
        out.append(text[at : max(at, f.start)])
        out.append(f"[redacted: {guardrail}]")
        at = max(at, f.end)
    out.append(text[at:])
    return "".join(out)


def kinds(found: list[Finding]) -> list[str]:
    return sorted({f.kind for f in found})


def _luhn(candidate: str) -> bool:
    digits = [int(c) for c in candidate if c.isdigit()]
    total = 0
    for i, d in enumerate(reversed(digits)):
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return len(digits) >= 13 and total % 10 == 0
