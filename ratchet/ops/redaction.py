"""Keep the worker's secrets out of everything an activity hands back, in the forms we can recognise.

Secrets reach the worker only through its environment (ratchet/ops/secrets.py lists them) and never
travel in workflow input. They can still come back in what an activity returns or raises: an
endpoint answering 401 with "Incorrect API key provided: sk-...", a program that prints one (read
from /proc, a file, anywhere), a tool that quotes one. A `Redactor` finds every secret in a text as
written, reversed, percent-encoded, in hex (lower or upper case) and in base64 (standard or
URL-safe, padded or not, and at any of the three byte alignments, so a secret inside a longer base64
blob is found), and any run of WINDOW or more characters of one of those forms; each is replaced by
`[REDACTED]`. A value shorter than WINDOW is matched whole only.

`RedactSecretsInterceptor` applies it to every activity's result (every string in it: tool outputs,
the model's reply) and failure (messages and causes), before anything is serialized, and makes it
the running activity's redactor (`redacted`), which the tool activities apply before a result goes
to the ledger or the artifact store. ratchet/ops/logs.py applies it to the worker's log records.
What no pattern can find (a secret encrypted, compressed, split into short pieces) is kept out of
reach of the code the agent runs instead (docs/OPERATIONS.md, Secrets).
"""

from __future__ import annotations

import base64
import contextvars
import re
from collections.abc import Iterable
from typing import Any, TypeVar
from urllib.parse import quote, quote_plus

from pydantic import BaseModel
from temporalio.exceptions import ApplicationError
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, Interceptor

from ratchet.ops.secrets import MIN_SECRET_CHARS, Secret

__all__ = [
    "MASK",
    "WINDOW",
    "Redactor",
    "RedactSecretsInterceptor",
    "encodings",
    "redacted",
    "redacted_error",
]

MASK = "[REDACTED]"
WINDOW = 16
"""Any run of this many characters of a secret (or of one of its encodings) is redacted."""
_GRAM = 8
"""Index step: a match of WINDOW characters holds a whole GRAM-long piece starting at a multiple of
GRAM, so looking up every GRAM-th piece of a text finds every match (16 KiB: 2,048 lookups)."""

T = TypeVar("T")
_current: contextvars.ContextVar[Redactor | None] = contextvars.ContextVar("ratchet_redactor", default=None)


def encodings(secret: Secret) -> set[str]:
    """The forms of `secret` a text is searched for (those of at least MIN_SECRET_CHARS)."""
    data = secret.encode() if isinstance(secret, str) else secret
    forms = {data.hex(), data.hex().upper()}
    if isinstance(secret, str):
        percent = quote(secret, safe="")
        forms |= {secret, secret[::-1], percent, quote_plus(secret, safe=""), re.sub(r"%[0-9A-F]{2}", _lower, percent)}
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        whole = encode(data).decode()
        forms |= {whole, whole.rstrip("=")}
        for k in (0, 1, 2):  # `data` at byte k of a longer blob: the characters no other byte changes
            shifted = encode(bytes(k) + data).decode()
            forms.add(shifted[-(-8 * k // 6) : 8 * (len(data) + k) // 6])
    return {form for form in forms if len(form) >= MIN_SECRET_CHARS}


def _lower(match: re.Match[str]) -> str:
    return match.group().lower()


class Redactor:
    """Finds and masks the given secrets in any form `encodings` lists. Built once per worker: the
    forms of WINDOW characters or more are indexed by their GRAM-long pieces, the shorter ones
    compiled into one pattern."""

    def __init__(self, secrets: Iterable[Secret]) -> None:
        self.secrets = sorted({s for s in secrets if len(s) >= MIN_SECRET_CHARS}, key=len, reverse=True)
        forms = set().union(*map(encodings, self.secrets))
        long = {f for f in forms if len(f) >= WINDOW}
        self._forms = sorted(f for f in long if not any(f in g and f != g for g in long))  # a part adds nothing
        short = sorted((f for f in forms if len(f) < WINDOW), key=len, reverse=True)
        self._short = re.compile("|".join(map(re.escape, short))) if short else None
        self._pieces: dict[str, list[tuple[int, int]]] = {}
        for i, form in enumerate(self._forms):
            for at in range(len(form) - _GRAM + 1):
                self._pieces.setdefault(form[at : at + _GRAM], []).append((i, at))

    def __bool__(self) -> bool:
        return bool(self.secrets)

    def spans(self, text: str) -> list[tuple[int, int]]:
        """Where secrets are in `text`: sorted, overlapping ones merged."""
        found = [m.span() for m in self._short.finditer(text)] if self._short is not None else []
        reach: dict[tuple[int, int], int] = {}  # (form, where it would start in text) -> end matched so far
        for p in range(0, len(text) - _GRAM + 1, _GRAM):
            for i, at in self._pieces.get(text[p : p + _GRAM], ()):
                if reach.get((i, p - at), -1) >= p + _GRAM:
                    continue  # inside a run already extended
                start, end = _common_run(text, p, self._forms[i], at)
                reach[(i, p - at)] = end
                if end - start >= WINDOW:
                    found.append((start, end))
        return _merged(found)

    def redact(self, text: str) -> str:
        """`text` with every match masked; `text` itself when there is none."""
        spans = self.spans(text) if self.secrets else []
        if not spans:
            return text
        out, last = [], 0
        for start, end in spans:
            out += [text[last:start], MASK]
            last = end
        out.append(text[last:])
        return "".join(out)


def _common_run(text: str, p: int, form: str, at: int) -> tuple[int, int]:
    """The longest stretch of `text` around text[p:p+GRAM] == form[at:at+GRAM] that equals `form`
    (compared a GRAM at a time, then a character at a time)."""
    start, f = p, at
    while start >= _GRAM and f >= _GRAM and text[start - _GRAM : start] == form[f - _GRAM : f]:
        start, f = start - _GRAM, f - _GRAM
    while start > 0 and f > 0 and text[start - 1] == form[f - 1]:
        start, f = start - 1, f - 1
    end, g = p + _GRAM, at + _GRAM
    while g + _GRAM <= len(form) and text[end : end + _GRAM] == form[g : g + _GRAM]:
        end, g = end + _GRAM, g + _GRAM
    while end < len(text) and g < len(form) and text[end] == form[g]:
        end, g = end + 1, g + 1
    return start, end


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def redacted(value: T, redactor: Redactor | None = None) -> T:
    """`value` with secrets masked in every string it holds (str, pydantic models, lists, tuples,
    dict values), by `redactor` or else the running activity's (none outside an activity run by
    RedactSecretsInterceptor: `value` as is). Unchanged parts are the same objects."""
    redactor = redactor if redactor is not None else _current.get()
    return _scrub(value, redactor) if redactor else value


def _scrub(value: Any, redactor: Redactor) -> Any:
    if isinstance(value, str):
        return redactor.redact(value)
    if isinstance(value, BaseModel):
        changed = {}
        for name in type(value).model_fields:
            old = getattr(value, name)
            new = _scrub(old, redactor)
            if new is not old:
                changed[name] = new
        return value.model_copy(update=changed) if changed else value
    if isinstance(value, (list, tuple)):
        items = [_scrub(v, redactor) for v in value]
        if all(a is b for a, b in zip(items, value)):
            return value
        return items if isinstance(value, list) else tuple(items)
    if isinstance(value, dict):
        entries = {k: _scrub(v, redactor) for k, v in value.items()}
        return entries if any(entries[k] is not value[k] for k in value) else value
    return value


class RedactSecretsInterceptor(Interceptor):
    def __init__(self, secrets: Iterable[Secret]) -> None:
        self.redactor = Redactor(secrets)

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _RedactingActivityInbound(next, self.redactor)


class _RedactingActivityInbound(ActivityInboundInterceptor):
    def __init__(self, next: ActivityInboundInterceptor, redactor: Redactor) -> None:
        super().__init__(next)
        self.redactor = redactor

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        token = _current.set(self.redactor)
        try:
            result = await self.next.execute_activity(input)
        except Exception as exc:
            clean = redacted_error(exc, self.redactor)
            if clean is exc:
                raise
            raise clean from None
        finally:
            _current.reset(token)
        return redacted(result, self.redactor)


def redacted_error(exc: BaseException, redactor: Redactor) -> BaseException:
    """`exc` itself when no message in its chain holds a secret; else an ApplicationError with the
    same type name and retry behaviour, the chain's messages redacted, and no payload details."""
    chain = _chain(exc)
    if not any(redactor.redact(str(e)) != str(e) for e in chain):
        return exc
    top = exc.message if isinstance(exc, ApplicationError) else str(exc)
    message = redactor.redact(top) + "".join(
        f" (caused by {type(cause).__name__}: {redactor.redact(str(cause))})" for cause in chain[1:]
    )
    if isinstance(exc, ApplicationError):
        return ApplicationError(
            message,
            type=exc.type,
            non_retryable=exc.non_retryable,
            next_retry_delay=exc.next_retry_delay,
            category=exc.category,
        )
    return ApplicationError(message, type=type(exc).__name__)


def _chain(exc: BaseException) -> list[BaseException]:
    chain, seen = [], set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        chain.append(current)
        current = current.__cause__ or (None if current.__suppress_context__ else current.__context__)
    return chain
