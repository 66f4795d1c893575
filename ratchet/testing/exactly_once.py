"""The exactly-once protocol (activities/exactly_once.py) run against a ledger backend: part of
`LedgerConformance` (ratchet/testing/stores.py), so every backend that passes the suite is known to
carry the protocol, not only its own methods. Each check drives `run` or `undo` with a call whose
acting, reconciling and undoing are counted, outside any activity (no person's decision applies
unless a check gives one)."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel
from temporalio.exceptions import ApplicationError

from ratchet.activities import exactly_once
from ratchet.contracts import ErrorType
from ratchet.stores.ledger import Entry, EntryStatus, Ledger


class Outcome(BaseModel):
    """What the checks' calls return and record."""

    output: str
    undo: dict[str, Any] | None = None


class Crash(Exception):
    """A worker that died after the call began (and maybe acted): the entry stays STARTED."""


class Refused(Exception):
    """The call failed before it acted (`Call.did_not_act`)."""


@dataclass
class Probe:
    """A call's world: what it did, counted."""

    ledger: Ledger
    key: str
    acted: list[str] = field(default_factory=list)
    prepared: int = 0
    reconciled: int = 0

    def call(self, output: str = "done", **how: Any) -> exactly_once.Call[Outcome, Outcome]:
        """A call that records `output`; `how`: the rest of `Call`'s fields (`act` too)."""
        how.setdefault("act", self.acting(output))
        return exactly_once.Call(
            key=self.key,
            result=_with_undo,
            recorded=Outcome.model_validate,
            what="probe",
            prepare=self._prepare,
            keeps_undo=True,
            did_not_act=(Refused,),
            **how,
        )

    def acting(self, output: str, *, undo: dict[str, Any] | None = None, then: Exception | None = None):
        async def act() -> Outcome:
            if undo is not None:
                self.ledger.set_undo(self.key, undo)  # as a tool's `ctx.record_undo`, before acting
            self.acted.append(output)
            if then is not None:
                raise then
            return Outcome(output=output, undo=undo)

        return act

    def reconciling(self, found: Outcome | None) -> Callable[[], Awaitable[Outcome | None]]:
        async def reconcile() -> Outcome | None:
            self.reconciled += 1
            return found

        return reconcile

    def _prepare(self) -> None:
        self.prepared += 1


def _with_undo(outcome: Outcome, undo: dict[str, Any] | None) -> Outcome:
    return outcome if undo is None else outcome.model_copy(update={"undo": undo})


def _run(ledger: Ledger, call: exactly_once.Call[Outcome, Outcome]) -> Outcome:
    return asyncio.run(exactly_once.run(ledger, call))


def _fails(ledger: Ledger, call: exactly_once.Call[Outcome, Outcome], error: type[BaseException]) -> BaseException:
    try:
        _run(ledger, call)
    except error as exc:
        return exc
    raise AssertionError(f"{call.key}: expected {error.__name__}")


def _recorded(ledger: Ledger, key: str) -> dict[str, Any]:
    entry = ledger.get(key)
    assert entry is not None and entry.status == EntryStatus.COMPLETED, f"{key!r} is not COMPLETED: {entry}"
    assert entry.result is not None, f"{key!r} is COMPLETED without a result"
    return entry.result


class ExactlyOnceChecks:
    """The protocol's rules, one `check_protocol_*` per rule (mixed into `LedgerConformance`)."""

    open_ledger: Callable[[], Ledger]

    def _probe(self) -> Probe:
        return Probe(self.open_ledger(), f"eo-{uuid.uuid4().hex[:12]}/1/call")

    def check_protocol_acts_once_then_returns_the_recorded_result(self) -> None:
        probe = self._probe()
        first = _run(probe.ledger, probe.call("receipt R-1"))
        assert first == Outcome(output="receipt R-1") and probe.acted == ["receipt R-1"] and probe.prepared == 1
        assert _recorded(probe.ledger, probe.key) == first.model_dump(mode="json")
        again = _run(probe.ledger, probe.call("receipt R-2"))
        assert again == first, f"a completed call must return its recorded result, got {again}"
        assert probe.acted == ["receipt R-1"] and probe.prepared == 1, "a completed call must not act or prepare"

    def check_protocol_acts_again_only_when_it_may(self) -> None:
        """STARTED, never completed: a reconcile hook's answer is recorded, an idempotent call
        repeats, any other refuses to guess (OutcomeUnknown, non-retryable), acting not at all."""
        found, missing, repeat, refuse = (self._probe() for _ in range(4))
        for probe in (found, missing, repeat, refuse):
            probe.ledger.begin(probe.key)
        assert _run(found.ledger, found.call(reconcile=found.reconciling(Outcome(output="T-1")))).output == "T-1"
        assert found.acted == [] and found.reconciled == 1 and _recorded(found.ledger, found.key)["output"] == "T-1"
        assert _run(missing.ledger, missing.call(reconcile=missing.reconciling(None))).output == "done"
        assert missing.acted == ["done"] and missing.reconciled == 1
        assert _run(repeat.ledger, repeat.call(idempotent=True)).output == "done" and repeat.acted == ["done"]
        error = _fails(refuse.ledger, refuse.call(), ApplicationError)
        assert isinstance(error, ApplicationError) and error.type == ErrorType.OUTCOME_UNKNOWN and error.non_retryable
        assert refuse.key in error.message and refuse.acted == [], error
        entry = refuse.ledger.get(refuse.key)
        assert entry is not None and entry.status == EntryStatus.STARTED and entry.starts == 2, entry

    def check_protocol_writes_once_for_a_call_that_does_not_claim(self) -> None:
        """The model call's way (`Call.claims` False): nothing is written before it acts, so a
        crash leaves no entry and the retry acts again; the result is recorded whole, and the next
        run returns it without acting. A call that may not skip its claim is refused."""
        probe, seen = self._probe(), []

        def unclaimed(output: str, then: Exception | None = None) -> exactly_once.Call[Outcome, Outcome]:
            async def act() -> Outcome:
                seen.append(probe.ledger.get(probe.key))
                probe.acted.append(output)
                if then is not None:
                    raise then
                return Outcome(output=output)

            return dataclasses.replace(probe.call(act=act), keeps_undo=False, idempotent=True, claims=False)

        _fails(probe.ledger, unclaimed("lost", then=Crash()), Crash)
        assert probe.ledger.get(probe.key) is None, "a call that does not claim must write nothing before acting"
        assert _run(probe.ledger, unclaimed("reply")).output == "reply" and seen == [None, None], seen
        assert _recorded(probe.ledger, probe.key) == {"output": "reply", "undo": None}
        assert _run(probe.ledger, unclaimed("again")).output == "reply" and probe.acted == ["lost", "reply"]
        try:
            dataclasses.replace(probe.call(), claims=False)  # keeps its undo, not idempotent
        except ValueError:
            return
        raise AssertionError("a call with an undo must not skip its claim")

    def check_protocol_follows_a_persons_decision(self) -> None:
        done, retry = self._probe(), self._probe()
        for probe in (done, retry):
            probe.ledger.begin(probe.key)
        assumed = done.call(decision="assume_done", assumed=lambda: Outcome(output="receipt R-9"))
        assert _run(done.ledger, assumed).output == "receipt R-9" and done.acted == []
        assert _recorded(done.ledger, done.key)["output"] == "receipt R-9"
        assert _run(retry.ledger, retry.call(decision="retry")).output == "done" and retry.acted == ["done"]

    def check_protocol_keeps_the_first_undo_record(self) -> None:
        """Whether a tool records it while acting or the call knows it before: the first attempt's
        record is the one the result carries and the ledger keeps."""
        probe, known = self._probe(), self._probe()
        crashing = probe.call(act=probe.acting("1", undo={"size": 1}, then=Crash()), idempotent=True)
        _fails(probe.ledger, crashing, Crash)
        result = _run(probe.ledger, probe.call(act=probe.acting("2", undo={"size": 2}), idempotent=True))
        assert result == Outcome(output="2", undo={"size": 1}), result
        assert _recorded(probe.ledger, probe.key) == result.model_dump(mode="json")
        _fails(known.ledger, known.call(act=known.acting("1", then=Crash()), undo_first={"v": 1}), Crash)
        _run(known.ledger, known.call(undo_first={"v": 2}, idempotent=True))
        entry = known.ledger.get(known.key)
        assert entry is not None and entry.undo == {"v": 1}, entry

    def check_protocol_releases_a_call_that_did_not_act(self) -> None:
        """Its key is free again, unless an earlier attempt may have acted."""
        probe, repeat = self._probe(), self._probe()
        _fails(probe.ledger, probe.call(act=probe.acting("x", then=Refused())), Refused)
        assert probe.ledger.get(probe.key) is None, "a call that did not act must release its key"
        assert _run(probe.ledger, probe.call()).output == "done" and probe.acted == ["x", "done"]
        _fails(repeat.ledger, repeat.call(act=repeat.acting("1", undo={"v": 1}, then=Crash())), Crash)
        _fails(repeat.ledger, repeat.call(act=repeat.acting("2", then=Refused()), idempotent=True), Refused)
        entry = repeat.ledger.get(repeat.key)
        assert entry is not None and entry.status == EntryStatus.STARTED and entry.undo == {"v": 1}, entry

    def check_undo_runs_once_with_the_record_it_is_given_or_the_ledgers(self) -> None:
        ledger, ns = self.open_ledger(), f"eo-{uuid.uuid4().hex[:12]}"
        ledger.begin(f"{ns}/1/a")
        ledger.set_undo(f"{ns}/1/a", {"restore": "v0"})  # the call never reported
        seen: list[tuple[dict[str, Any] | None, Entry | None]] = []

        async def act(record: dict[str, Any] | None, forward: Entry | None) -> str:
            seen.append((record, forward))
            return f"restored {(record or {}).get('restore')}"

        assert asyncio.run(exactly_once.undo(ledger, f"{ns}/1/a", None, act)) == "restored v0"
        assert seen[0][0] == {"restore": "v0"} and seen[0][1] is not None and seen[0][1].key == f"{ns}/1/a"
        assert asyncio.run(exactly_once.undo(ledger, f"{ns}/1/a", None, act)) == "restored v0" and len(seen) == 1
        assert _recorded(ledger, f"{ns}/1/a/undo") == {"output": "restored v0"}
        given = asyncio.run(exactly_once.undo(ledger, f"{ns}/2/a", {"restore": "v1"}, act))
        assert given == "restored v1" and seen[1] == ({"restore": "v1"}, None)
        assert ledger.get(f"{ns}/2/a") is None, "undo must not touch the forward call's entry"
