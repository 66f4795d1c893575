"""Exactly once: the ledger protocol around every call that acts on the world, and around its undo,
written once. Tools (activities/tools.py), MCP tools (activities/mcp.py) and the model call
(activities/model.py) say how a call acts, reconciles and undoes and how its result is read and
recorded (`Call`, `undo`'s `act`); `run` and `undo` do the rest on any `Ledger`
(ratchet/stores/ledger.py). `LedgerConformance` (ratchet/testing/stores.py) drives both on every
backend.

`run`, for one call under its key:

1. `begin(key)`. COMPLETED: the recorded result; nothing acts.
2. STARTED by an earlier attempt that never completed, the *outcome unknown*: a person's
   `assume_done` records the call as done, a person's `retry` acts again; otherwise the call's
   `reconcile` asks the target system (found: recorded as the result; not found: act), an
   `idempotent` call acts again, and any other fails non-retryably (`OutcomeUnknown`), so the run
   asks a person (workflows/outcomes.py).
3. The undo record a call knows before acting goes to the ledger (`Call.undo_first`).
4. Act. A call that failed before it acted raises one of `Call.did_not_act`: the key is released
   (unless an earlier attempt may have acted: an idempotent call repeated over an unknown outcome
   keeps its entry, and its first undo record) and the error propagates, to be retried as usual.
5. The outcome as the activity returns it, carrying the ledger's *first* undo record (a retry must
   not replace the state from before the first attempt), secrets masked; `complete(key, ...)`.

A call that records no undo and acts again over an unknown outcome anyway (the model call:
`idempotent`, no `reconcile`) does not claim its key: step 1 only reads its entry (`Call.claims`
False), since a STARTED record would change nothing its retry does, and `complete` records the
entry whole. Its usual path writes the ledger once, not twice.

`undo`, under the key `{key}/undo`: `begin`; COMPLETED: the recorded output; else the undo record the
workflow sent or, when the call never reported, the one in the ledger; undo; secrets masked;
`complete`. Undo functions must be safe when the forward call did nothing.

The ledger is synchronous and may be remote, so its calls run in a thread (`asyncio.to_thread`),
never on the worker's event loop. `run` makes two hops on its usual path: `begin` with
`Call.prepare` (what the call reads before it acts: the model call's config and transcript), then
`Call.result` with `complete` (the model call's transcript write); one more records `undo_first`,
one more releases a call that did not act.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel
from temporalio import activity
from temporalio.exceptions import ApplicationError

from ratchet.contracts import ErrorType
from ratchet.contracts.outcomes import OutcomeChoice
from ratchet.core.keys import undo_key
from ratchet.ops.redaction import redacted
from ratchet.stores.ledger import Entry, EntryStatus, Ledger

A = TypeVar("A")
R = TypeVar("R", bound=BaseModel)
UndoAct = Callable[[dict[str, Any] | None, Entry | None], Awaitable[str]]
"""An undo: (the undo record or None, the forward call's ledger entry if it was read) -> its output."""


@dataclass(frozen=True)
class Call(Generic[A, R]):
    """One call that acts on the world, as the protocol needs it: `A` is what acting gives, `R` what
    the activity returns and the ledger records (a pydantic model)."""

    key: str
    act: Callable[[], Awaitable[A]]
    """Act on the world (step 4)."""
    result: Callable[[A, dict[str, Any] | None], R]
    """In the ledger's thread, before `complete`: the outcome as the activity returns it, given the
    ledger's first undo record (read only if `keeps_undo`)."""
    recorded: Callable[[dict[str, Any]], R]
    """A completed call's recorded result as the activity returns it."""
    what: str
    """The call in an `OutcomeUnknown` message: a tool's name, with its MCP server."""
    prepare: Callable[[], None] | None = None
    """In `begin`'s thread, only when the call will act: what it must read first."""
    decision: str | None = None
    """A person's decision on the earlier attempt's unknown outcome (`OutcomeChoice`), if any."""
    assumed: Callable[[], A] | None = None
    """The outcome a person's `assume_done` records."""
    reconcile: Callable[[], Awaitable[A | None]] | None = None
    """Ask the target system whether an earlier attempt took effect: its outcome if so, else None."""
    idempotent: bool = False
    """Acting again under the same key is safe: an unknown outcome is simply repeated."""
    undo_first: dict[str, Any] | None = None
    """What the undo needs, known before acting: recorded before it (the first record wins)."""
    keeps_undo: bool = False
    """The result carries the undo: the ledger's first record replaces the one acting gave."""
    redact: bool = False
    """Mask secrets in the result before it is recorded and returned."""
    did_not_act: tuple[type[BaseException], ...] = ()
    """Errors `act` raises only when it failed before acting."""
    claims: bool = True
    """`begin` records the call STARTED before it acts. False: its entry is only read, for an
    `idempotent` call with no `reconcile` and no undo, which a STARTED record would not change."""

    def __post_init__(self) -> None:
        if not self.claims and (
            not self.idempotent or self.reconcile is not None or self.undo_first is not None or self.keeps_undo
        ):
            raise ValueError(f"{self.what}: only an idempotent call with no reconcile and no undo may skip its claim")


async def run(ledger: Ledger | None, call: Call[A, R]) -> R:
    """`call` at most once under its key (module docstring); without a ledger it just acts."""
    entry = await asyncio.to_thread(_begin, ledger, call)
    if entry is not None and entry.status == EntryStatus.COMPLETED:
        activity.logger.info("%s: already done, returning the recorded result", call.key)
        return call.recorded(entry.result or {})
    if entry is None:
        return await _act(ledger, call, alone=True)
    if call.decision == OutcomeChoice.ASSUME_DONE and call.assumed is not None:
        return await _record(ledger, call, call.assumed())
    if call.decision == OutcomeChoice.RETRY:  # a person checked: it did not take effect
        return await _act(ledger, call, alone=True)
    found = await _reconcile(call)
    if found is not None:
        return await _record(ledger, call, found)
    # the hook found nothing: the earlier attempt did not act; an idempotent repeat: it may have
    return await _act(ledger, call, alone=call.reconcile is not None)


async def _act(ledger: Ledger | None, call: Call[A, R], *, alone: bool) -> R:
    """Steps 3 to 5. `alone`: no earlier attempt may have acted, so a call that did not act
    releases its key; otherwise the entry (and its first undo record) stays."""
    if call.undo_first is not None and ledger is not None:
        await asyncio.to_thread(ledger.set_undo, call.key, call.undo_first)
    try:
        outcome = await call.act()
    except call.did_not_act:
        if alone and ledger is not None and call.claims:
            await asyncio.to_thread(ledger.release, call.key)
        raise
    return await _record(ledger, call, outcome)


def _begin(ledger: Ledger | None, call: Call[Any, Any]) -> Entry | None:
    """In a thread: `begin` (or, for a call that does not claim its key, `get`), then what the
    call reads before acting (unless it is done)."""
    entry = None if ledger is None else ledger.begin(call.key) if call.claims else ledger.get(call.key)
    if call.prepare is not None and (entry is None or entry.status != EntryStatus.COMPLETED):
        call.prepare()
    return entry


async def _reconcile(call: Call[A, Any]) -> A | None:
    """An earlier attempt's outcome is unknown: what the target system says happened, None to act."""
    if call.reconcile is not None:
        return await call.reconcile()
    if call.idempotent:
        return None
    raise ApplicationError(
        f"{call.key}: an earlier attempt of {call.what} started but its outcome is unknown, and it has "
        f"no reconcile hook and is not idempotent; a person must decide whether it took effect: the run "
        f"waits for a decision (`ratchet decide`: retry, assume_done, skip or fail)",
        type=ErrorType.OUTCOME_UNKNOWN,
        non_retryable=True,
    )


async def _record(ledger: Ledger | None, call: Call[A, R], outcome: A) -> R:
    return await asyncio.to_thread(_complete, ledger, call, outcome)


def _complete(ledger: Ledger | None, call: Call[A, R], outcome: A) -> R:
    """In a thread: the outcome as the call's result, with the first undo record, recorded."""
    first = None
    if call.keeps_undo and ledger is not None:
        entry = ledger.get(call.key)
        first = entry.undo if entry is not None else None
    result = call.result(outcome, first)
    if call.redact:
        result = redacted(result)
    if ledger is not None:
        ledger.complete(call.key, result.model_dump(mode="json"))
    return result


async def undo(ledger: Ledger, key: str, record: dict[str, Any] | None, act: UndoAct) -> str:
    """Undo the call under `key` at most once (ledger key `{key}/undo`). `record`: the undo record
    the workflow has (from the call's result), else None to read the ledger's."""
    key_of_undo = undo_key(key)
    entry = await asyncio.to_thread(ledger.begin, key_of_undo)
    if entry is not None and entry.status == EntryStatus.COMPLETED:
        return str((entry.result or {}).get("output", "already undone"))
    forward = None
    if record is None:
        forward = await asyncio.to_thread(ledger.get, key)
        record = forward.undo if forward is not None else None
    output = redacted(await act(record, forward))
    await asyncio.to_thread(ledger.complete, key_of_undo, {"output": output})
    return output
