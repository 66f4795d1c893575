"""Conformance suites for the store protocols: `Ledger` (with the exactly-once protocol that runs on
it) and `ArtifactStore` (ratchet/stores/).

A backend passes if every check passes against it. The checks use the protocol only; what they
need beyond it comes from the backend's test module as functions:

- `open_ledger()` / `open_store()`: a new handle on the store under test. Two calls give two
  handles on the same store, as two workers have. The store need not be empty: every check uses
  keys, workflow ids and blobs of its own. The function must be picklable (a module-level
  function, or `functools.partial` of a class): the race checks call it in spawned processes.
- `tamper(digest, data)` (artifacts only): make the store hold `data` under `digest` without
  going through `put`, as disk rot, a bad copy or a hostile writer would.

With pytest, one test per check and a fresh store each (see tests/stores/test_ledger.py)::

    @pytest.mark.parametrize("check", LedgerConformance.checks())
    def test_conformance(check, tmp_path):
        LedgerConformance(functools.partial(SqliteLedger, tmp_path / "ledger.sqlite3")).run(check)

Without it, `LedgerConformance(open_ledger).run_all()` (under `if __name__ == "__main__":`, since
the race checks spawn processes). Checks fail with AssertionError; this module needs only the
standard library and ratchet.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import random
import time
import traceback
import uuid
from collections.abc import Callable
from typing import Any

from ratchet.contracts import ArtifactRef
from ratchet.stores.artifacts import DIGEST, ArtifactCorrupt, ArtifactMissing, ArtifactStore, get_json, put_json
from ratchet.stores.ledger import ChainRecord, Entry, EntryRecord, EntryStatus, ImportOutcome, Ledger, LedgerRecord
from ratchet.testing.exactly_once import ExactlyOnceChecks

__all__ = ["ArtifactStoreConformance", "LedgerConformance"]


class _Suite:
    @classmethod
    def checks(cls) -> list[str]:
        """The names of the checks, in definition order (ids for pytest's parametrize)."""
        names = (name for klass in reversed(cls.__mro__) for name in vars(klass) if name.startswith("check_"))
        return list(dict.fromkeys(names))

    def run(self, name: str) -> None:
        if not name.startswith("check_"):
            raise ValueError(f"not a check: {name!r}")
        getattr(self, name)()

    def run_all(self) -> None:
        for name in self.checks():
            self.run(name)


def _ns() -> str:
    """A prefix no other check (or earlier run on the same store) uses."""
    return f"conf-{uuid.uuid4().hex[:12]}"


# --- the ledger ---------------------------------------------------------------------------------


def _expect(
    entry: Entry | None,
    key: str,
    status: EntryStatus,
    *,
    starts: int,
    undo: Any = None,
    result: Any = None,
    what: str = "",
) -> None:
    where = f"{what}: " if what else ""
    assert entry is not None, f"{where}no entry for {key!r}"
    assert entry.key == key, f"{where}entry for {key!r} has key {entry.key!r}"
    assert entry.status == status, f"{where}{key!r} is {entry.status!r}, expected {status!r}"
    assert entry.starts == starts, f"{where}{key!r} has starts={entry.starts}, expected {starts}"
    assert entry.undo == undo, f"{where}{key!r} has undo {entry.undo!r}, expected {undo!r}"
    assert entry.result == result, f"{where}{key!r} has result {entry.result!r}, expected {result!r}"


class LedgerConformance(ExactlyOnceChecks, _Suite):
    """The `Ledger` contract (see the protocol's docstrings), one `check_*` method per rule; and the
    exactly-once protocol (activities/exactly_once.py) run on it (`check_protocol_*`, `check_undo_*`:
    ratchet/testing/exactly_once.py)."""

    def __init__(
        self, open_ledger: Callable[[], Ledger], *, processes: int = 2, race_keys: int = 100, timeout: float = 120.0
    ) -> None:
        self.open_ledger = open_ledger
        self.processes = processes
        self.race_keys = race_keys
        self.timeout = timeout

    # begin / get

    def check_begin_claims_an_unknown_key(self) -> None:
        ledger, key = self.open_ledger(), f"{_ns()}/1/call"
        assert ledger.get(key) is None, "get of a key never begun must be None"
        assert ledger.begin(key) is None, "the first begin of a key must return None (the caller has it)"
        _expect(ledger.get(key), key, EntryStatus.STARTED, starts=1, what="after the first begin")

    def check_begin_again_returns_the_entry_and_counts_the_start(self) -> None:
        ledger, key = self.open_ledger(), f"{_ns()}/1/call"
        ledger.begin(key)
        _expect(
            ledger.begin(key), key, EntryStatus.STARTED, starts=1, what="the second begin returns the entry before it"
        )
        _expect(ledger.get(key), key, EntryStatus.STARTED, starts=2, what="after the second begin")
        _expect(ledger.begin(key), key, EntryStatus.STARTED, starts=2, what="the third begin")
        _expect(ledger.get(key), key, EntryStatus.STARTED, starts=3, what="after the third begin")

    def check_get_only_reads(self) -> None:
        ledger, ns = self.open_ledger(), _ns()
        ledger.get(f"{ns}/1/unknown")
        assert ledger.begin(f"{ns}/1/unknown") is None, "get must not create an entry"
        ledger.get(f"{ns}/1/unknown")
        _expect(
            ledger.get(f"{ns}/1/unknown"),
            f"{ns}/1/unknown",
            EntryStatus.STARTED,
            starts=1,
            what="get must not count a start",
        )

    # complete

    def check_complete_records_the_result_and_begin_returns_it(self) -> None:
        ledger, key = self.open_ledger(), f"{_ns()}/1/call"
        ledger.begin(key)
        ledger.complete(key, {"ok": True, "output": "done"})
        _expect(ledger.get(key), key, EntryStatus.COMPLETED, starts=1, result={"ok": True, "output": "done"})
        _expect(
            ledger.begin(key),
            key,
            EntryStatus.COMPLETED,
            starts=1,
            result={"ok": True, "output": "done"},
            what="begin of a completed key returns it",
        )
        _expect(
            ledger.get(key),
            key,
            EntryStatus.COMPLETED,
            starts=1,
            result={"ok": True, "output": "done"},
            what="begin must not change a completed entry",
        )

    def check_a_completed_entry_is_final(self) -> None:
        """Begun or not (a call that does not claim its key, activities/exactly_once.py's
        `Call.claims`, only completes it): the first result stays, and the entry is whole."""
        ledger, ns = self.open_ledger(), _ns()
        for key, begun in ((f"{ns}/1/call", True), (f"{ns}/1/model", False)):
            if begun:
                ledger.begin(key)
            ledger.complete(key, {"reply": "first"})
            ledger.complete(key, {"reply": "second"})
            _expect(
                ledger.begin(key),
                key,
                EntryStatus.COMPLETED,
                starts=1,
                result={"reply": "first"},
                what=f"{'a begun' if begun else 'a never begun'} key: a second complete or a begin changed it",
            )
        records = [r for r in ledger.export() if isinstance(r, EntryRecord) and r.key.startswith(f"{ns}/")]
        assert len(records) == 2 and all(r.started_at and r.completed_at for r in records), records

    # forget

    def check_forget_deletes_a_runs_entries_and_chain_and_nothing_else(self) -> None:
        ledger, ns = self.open_ledger(), _ns()
        run, other, upper = f"{ns}-run.shadow-1", f"{ns}-run.shadow-10", f"{ns}-RUN.shadow-1"
        for key in (f"{run}/1/a", f"{other}/1/a", f"{upper}/1/a", f"{ns}-run/1/a"):
            ledger.begin(key)
        ledger.claim(run, "chain-1")  # the entry before it moves aside, under `#unclaimed#`
        ledger.begin(f"{run}/1/a")
        ledger.complete(f"{run}/1/a", {"ok": True})
        assert ledger.forget(run) == 2, "forget deletes the run's entry and the one its claim moved aside"
        assert ledger.get(f"{run}/1/a") is None and ledger.get(f"#unclaimed#{run}/1/a") is None
        for kept in (f"{other}/1/a", f"{upper}/1/a", f"{ns}-run/1/a"):  # a longer id, another case, the original
            _expect(ledger.get(kept), kept, EntryStatus.STARTED, starts=1, what="forget of another run")
        records = list(ledger.export())
        assert not [r for r in records if isinstance(r, EntryRecord) and f"{run}/" in r.key], "an entry is left"
        assert not [r for r in records if isinstance(r, ChainRecord) and r.workflow_id == run], "its chain is left"
        assert ledger.forget(run) == 0, "forgetting again deletes nothing"
        assert ledger.claim(run, "chain-2") is None, "the chain went with the run: a new claim finds none"

    # release

    def check_release_forgets_a_started_entry_and_keeps_a_completed_one(self) -> None:
        ledger, key, done = self.open_ledger(), f"{_ns()}/1/call", f"{_ns()}/2/call"
        ledger.begin(key)
        ledger.set_undo(key, {"before": "first attempt"})
        ledger.release(key)
        assert ledger.get(key) is None, "release must delete a STARTED entry"
        assert ledger.begin(key) is None, "after release, begin claims the key afresh"
        ledger.set_undo(key, {"before": "second attempt"})
        _expect(
            ledger.get(key),
            key,
            EntryStatus.STARTED,
            starts=1,
            undo={"before": "second attempt"},
            what="a released key's old undo record must be gone",
        )
        ledger.begin(done)
        ledger.complete(done, {"reply": "kept"})
        ledger.release(done)
        _expect(
            ledger.get(done),
            done,
            EntryStatus.COMPLETED,
            starts=1,
            result={"reply": "kept"},
            what="release must not change a completed entry",
        )

    # set_undo

    def check_the_first_undo_record_wins_and_outlives_complete(self) -> None:
        ledger, key = self.open_ledger(), f"{_ns()}/1/call"
        ledger.begin(key)
        ledger.set_undo(key, {"previous": "before the first attempt"})
        _expect(ledger.get(key), key, EntryStatus.STARTED, starts=1, undo={"previous": "before the first attempt"})
        ledger.begin(key)  # a retry: it records what the first attempt wrote, which must not win
        ledger.set_undo(key, {"previous": "what the first attempt wrote"})
        ledger.complete(key, {"ok": True})
        _expect(
            ledger.get(key),
            key,
            EntryStatus.COMPLETED,
            starts=2,
            undo={"previous": "before the first attempt"},
            result={"ok": True},
            what="the undo record after a retry and complete",
        )

    # values and keys

    def check_results_and_undo_records_round_trip_as_json(self) -> None:
        ledger, ns = self.open_ledger(), _ns()
        value = {  # NUL: tool output can hold it (a binary file read as text); Postgres jsonb cannot
            "text": "naïve ✓ 日本語 \u202e \x00 \"quoted\" 'single' \\ back\nnew line",
            "numbers": [0, -1, 2**53, 1.5, -0.25],
            "flags": [True, False, None],
            "nested": {"empty_list": [], "empty_object": {}, "deep": {"a": [{"b": None}]}},
            "big": "x" * 200_000,
        }
        ledger.begin(f"{ns}/1/full")
        ledger.set_undo(f"{ns}/1/full", value)
        ledger.complete(f"{ns}/1/full", value)
        _expect(ledger.get(f"{ns}/1/full"), f"{ns}/1/full", EntryStatus.COMPLETED, starts=1, undo=value, result=value)
        ledger.begin(f"{ns}/1/empty")
        ledger.set_undo(f"{ns}/1/empty", {})
        ledger.set_undo(f"{ns}/1/empty", {"previous": "later"})
        ledger.complete(f"{ns}/1/empty", {})
        _expect(
            ledger.get(f"{ns}/1/empty"),
            f"{ns}/1/empty",
            EntryStatus.COMPLETED,
            starts=1,
            undo={},
            result={},
            what="an empty object is a record (not None), and the first one",
        )

    def check_keys_are_exact_case_sensitive_strings(self) -> None:
        ledger, ns = self.open_ledger(), _ns()
        keys = [
            f"{ns}/1/a",
            f"{ns}/1/A",
            f"{ns}/1/a/undo",
            f"{ns}/1/a_c",
            f"{ns}/1/a%",
            f"{ns}/1/a*",
            f"{ns}/1/a?",
            f"{ns}/1/[ab]",
            f"{ns}/1/a.c",
            f"#{ns}#x/1/a",
            f"{ns}/1/ü ß ✓",
            f"{ns}/1/" + "k" * 1000,
        ]
        for key in keys:
            assert ledger.begin(key) is None, f"{key!r} is a new key, distinct from {keys[: keys.index(key)]}"
        for key, result in zip(keys, range(len(keys))):
            ledger.complete(key, {"n": result})
        for key, result in zip(keys, range(len(keys))):
            _expect(ledger.get(key), key, EntryStatus.COMPLETED, starts=1, result={"n": result})
        for absent in (
            f"{ns}/1/abc",
            f"{ns}/1/aXc",
            f"{ns}/1/ab",
            f"{ns}/1/a.",
            f"{ns}/1/b",
            f"{ns}/1/",
            f"{ns}/1",
            f"{ns}/1/a/",
            f"{ns.upper()}/1/a",
            f" {ns}/1/a",
        ):
            assert ledger.get(absent) is None, f"{absent!r} was never begun: no pattern or prefix matching"

    def check_handles_share_one_durable_store(self) -> None:
        key = f"{_ns()}/1/call"
        first, second = self.open_ledger(), self.open_ledger()
        assert first.begin(key) is None
        _expect(second.begin(key), key, EntryStatus.STARTED, starts=1, what="another handle sees the begin")
        second.set_undo(key, {"previous": 1})
        second.complete(key, {"ok": True})
        _expect(
            first.get(key),
            key,
            EntryStatus.COMPLETED,
            starts=2,
            undo={"previous": 1},
            result={"ok": True},
            what="the first handle sees the other's writes",
        )
        del first, second
        _expect(
            self.open_ledger().get(key),
            key,
            EntryStatus.COMPLETED,
            starts=2,
            undo={"previous": 1},
            result={"ok": True},
            what="a handle opened later sees the entry",
        )

    # claim

    def check_claiming_again_for_the_same_chain_changes_nothing(self) -> None:
        ledger, wf = self.open_ledger(), _ns()
        assert ledger.claim(wf, "chain-1") is None, "the first claim of an id with no entries returns None"
        ledger.begin(f"{wf}/1/model")
        ledger.complete(f"{wf}/1/model", {"reply": "mine"})
        assert ledger.claim(wf, "chain-1") is None, "the owning chain claiming again (a retry) returns None"
        _expect(
            ledger.get(f"{wf}/1/model"),
            f"{wf}/1/model",
            EntryStatus.COMPLETED,
            starts=1,
            result={"reply": "mine"},
            what="the owning chain's entries stay where they are",
        )

    def check_a_new_chain_sets_the_earlier_chains_entries_aside(self) -> None:
        ledger, wf = self.open_ledger(), _ns()
        ledger.claim(wf, "chain-1")
        ledger.begin(f"{wf}/1/model")
        ledger.complete(f"{wf}/1/model", {"reply": "old"})
        ledger.begin(f"{wf}/2/call")
        ledger.set_undo(f"{wf}/2/call", {"previous": "p"})
        ledger.begin(f"{wf}/2/call/undo")
        ledger.begin(f"{wf}/2/call/undo")
        assert ledger.claim(wf, "chain-2") == "chain-1", "a new chain's claim returns the old chain"
        for key in (f"{wf}/1/model", f"{wf}/2/call", f"{wf}/2/call/undo"):
            assert ledger.get(key) is None, f"{key!r} must be set aside by the new chain's claim"
        _expect(
            ledger.get(f"#chain-1#{wf}/1/model"),
            f"#chain-1#{wf}/1/model",
            EntryStatus.COMPLETED,
            starts=1,
            result={"reply": "old"},
            what="the archived entry is whole",
        )
        _expect(
            ledger.get(f"#chain-1#{wf}/2/call"),
            f"#chain-1#{wf}/2/call",
            EntryStatus.STARTED,
            starts=1,
            undo={"previous": "p"},
            what="the archived entry is whole",
        )
        _expect(
            ledger.get(f"#chain-1#{wf}/2/call/undo"),
            f"#chain-1#{wf}/2/call/undo",
            EntryStatus.STARTED,
            starts=2,
            what="the archived entry is whole",
        )
        assert ledger.begin(f"{wf}/1/model") is None, "the new chain begins the key afresh"
        ledger.complete(f"{wf}/1/model", {"reply": "new"})
        assert ledger.claim(wf, "chain-2") is None
        assert ledger.claim(wf, "chain-3") == "chain-2"
        _expect(
            ledger.get(f"#chain-2#{wf}/1/model"),
            f"#chain-2#{wf}/1/model",
            EntryStatus.COMPLETED,
            starts=1,
            result={"reply": "new"},
            what="the second chain's entry, set aside by the third",
        )
        _expect(
            ledger.get(f"#chain-1#{wf}/1/model"),
            f"#chain-1#{wf}/1/model",
            EntryStatus.COMPLETED,
            starts=1,
            result={"reply": "old"},
            what="an archived entry is not moved again",
        )

    def check_entries_from_before_any_claim_are_set_aside_as_unclaimed(self) -> None:
        ledger, wf = self.open_ledger(), _ns()
        ledger.begin(f"{wf}/1/call")
        ledger.complete(f"{wf}/1/call", {"ok": True})
        assert ledger.claim(wf, "chain-1") is None, "no chain owned the id: the claim returns None"
        assert ledger.get(f"{wf}/1/call") is None, "an entry from before any claim is set aside"
        _expect(
            ledger.get(f"#unclaimed#{wf}/1/call"),
            f"#unclaimed#{wf}/1/call",
            EntryStatus.COMPLETED,
            starts=1,
            result={"ok": True},
        )

    def check_a_claim_touches_only_its_own_workflow_id(self) -> None:
        ledger, ns = self.open_ledger(), _ns()
        claimed = [f"{ns}-wf", f"{ns}-w_%", f"{ns}-Fix-Bug", f"{ns}-w.f", f"{ns}-w*"]
        others = [
            f"{ns}-wf-other",
            f"{ns}-wf2",
            f"{ns}-wX%",
            f"{ns}-w_%x",
            f"{ns}-fix-bug",
            f"{ns}-FIX-BUG",
            f"{ns}-wXf",
            f"{ns}-w*x",
            f"{ns}-W*",
            f"x{ns}-wf",
            f"{ns}-wf ",
        ]
        for wf in claimed + others:
            ledger.begin(f"{wf}/1/model")
            ledger.complete(f"{wf}/1/model", {"id": wf})
        for wf in claimed:
            ledger.claim(wf, "chain-1")
            assert ledger.get(f"{wf}/1/model") is None, f"claim({wf!r}) must set aside {wf!r}/1/model"
        for wf in others:
            _expect(
                ledger.get(f"{wf}/1/model"),
                f"{wf}/1/model",
                EntryStatus.COMPLETED,
                starts=1,
                result={"id": wf},
                what=f"claims of {claimed} must leave {wf!r} alone (exact, case-sensitive prefix)",
            )
        for wf in claimed:
            _expect(
                ledger.get(f"#unclaimed#{wf}/1/model"),
                f"#unclaimed#{wf}/1/model",
                EntryStatus.COMPLETED,
                starts=1,
                result={"id": wf},
            )

    def check_claims_are_per_workflow_id(self) -> None:
        ledger, ns = self.open_ledger(), _ns()
        assert ledger.claim(f"{ns}-a", "chain-1") is None
        assert ledger.claim(f"{ns}-b", "chain-2") is None
        assert ledger.claim(f"{ns}-a", "chain-1") is None, "another id's claim must not change this id's owner"
        assert ledger.claim(f"{ns}-b", "chain-2") is None, "another id's claim must not change this id's owner"
        assert ledger.claim(f"{ns}-a", "chain-2") == "chain-1"
        assert ledger.claim(f"{ns}-b", "chain-3") == "chain-2"

    # export / import (moving a ledger to another backend)

    def check_export_gives_every_entry_and_chain_with_its_fields(self) -> None:
        ledger, wf = self.open_ledger(), _ns()
        began = time.time()
        ledger.claim(wf, "chain-1")
        ledger.begin(f"{wf}/1/model")
        ledger.complete(f"{wf}/1/model", {"reply": "r"})
        ledger.begin(f"{wf}/2/call")
        ledger.set_undo(f"{wf}/2/call", {"previous": "p"})
        ledger.begin(f"{wf}/2/call")
        ended = time.time()
        exported = list(self.open_ledger().export())
        names = [_record_name(r) for r in exported]
        assert len(names) == len(set(names)), "export must give each entry and chain once"
        mine = {_record_name(r): r for r in exported if _record_name(r)[1].startswith(wf)}
        assert sorted(mine) == [("chain", wf), ("entry", f"{wf}/1/model"), ("entry", f"{wf}/2/call")], sorted(mine)
        model, call, chain = mine["entry", f"{wf}/1/model"], mine["entry", f"{wf}/2/call"], mine["chain", wf]
        assert isinstance(model, EntryRecord) and isinstance(call, EntryRecord) and isinstance(chain, ChainRecord)
        assert (model.status, model.undo, model.result, model.starts) == (
            EntryStatus.COMPLETED,
            None,
            {"reply": "r"},
            1,
        ), model
        assert (call.status, call.undo, call.result, call.starts) == (
            EntryStatus.STARTED,
            {"previous": "p"},
            None,
            2,
        ), call
        assert chain.chain == "chain-1", chain
        assert call.completed_at is None, f"a STARTED entry has no completion time: {call}"
        assert model.completed_at is not None and model.completed_at >= model.started_at, model
        for when in (model.started_at, model.completed_at, call.started_at, chain.claimed_at):
            assert began - 60 <= when <= ended + 60, f"{when} is not the time of the write (seconds since the epoch)"

    def check_import_copies_keeps_and_reports_conflicts(self) -> None:
        ledger, ns = self.open_ledger(), _ns()
        at = 1_700_000_000.25
        value = {"text": 'naïve ✓ \x00 "q"', "nested": {"empty": {}, "list": [1, 2.5, None, True]}}
        records: list[LedgerRecord] = [
            EntryRecord(f"{ns}/1/model", EntryStatus.COMPLETED, None, {"reply": "r"}, 1, at, at + 1.5),
            EntryRecord(f"{ns}/2/call", EntryStatus.STARTED, value, None, 3, at + 2, None),
            EntryRecord(f"{ns}/2/call/undo", EntryStatus.COMPLETED, {}, {}, 2, at + 3, at + 4),
            ChainRecord(ns, "chain-1", at),
        ]
        copied, present, conflict = ImportOutcome.COPIED, ImportOutcome.PRESENT, ImportOutcome.CONFLICT
        assert ledger.import_entries(records, dry_run=True) == [copied] * 4, "a dry run reports what it would copy"
        assert ledger.get(f"{ns}/1/model") is None, "a dry run writes nothing"
        assert not [r for r in ledger.export() if _record_name(r)[1].startswith(ns)], "a dry run writes nothing"
        assert ledger.import_entries(records) == [copied] * 4, "records under free keys are copied"
        _expect(ledger.get(f"{ns}/2/call"), f"{ns}/2/call", EntryStatus.STARTED, starts=3, undo=value)
        exported = {_record_name(r): r for r in self.open_ledger().export() if _record_name(r)[1].startswith(ns)}
        for record in records:
            back = exported.get(_record_name(record))
            assert back is not None, f"{record} was exported as {back}"
            assert record.same_as(back), f"{record} was exported as {back}"  # type: ignore[arg-type]  # of one kind
            assert _times(back) == _times(record), f"times of {record} came back as {_times(back)}"
        assert ledger.import_entries(records) == [present] * 4, "importing the same records again finds them all"
        assert ledger.import_entries(records, dry_run=True) == [present] * 4
        different: list[LedgerRecord] = [
            EntryRecord(f"{ns}/1/model", EntryStatus.COMPLETED, None, {"reply": "another"}, 1, at, at + 1.5),
            EntryRecord(f"{ns}/2/call", EntryStatus.STARTED, value, None, 4, at + 2, None),
            ChainRecord(ns, "chain-2", at),
            EntryRecord(f"{ns}/3/new", EntryStatus.STARTED, None, None, 1, at, None),
        ]
        assert ledger.import_entries(different) == [conflict, conflict, conflict, copied], (
            "a different row under a key is a conflict; the rest is copied"
        )
        _expect(
            ledger.get(f"{ns}/1/model"),
            f"{ns}/1/model",
            EntryStatus.COMPLETED,
            starts=1,
            result={"reply": "r"},
            what="a conflicting record must not overwrite the row",
        )
        _expect(
            ledger.get(f"{ns}/2/call"),
            f"{ns}/2/call",
            EntryStatus.STARTED,
            starts=3,
            undo=value,
            what="a conflicting record must not overwrite the row",
        )
        assert ledger.claim(ns, "chain-1") is None, "the imported chain owns its workflow id"
        assert ledger.claim(ns, "chain-3") == "chain-1", "the imported chain (not the conflicting one) is kept"
        _expect(
            ledger.get(f"#chain-1#{ns}/1/model"),
            f"#chain-1#{ns}/1/model",
            EntryStatus.COMPLETED,
            starts=1,
            result={"reply": "r"},
            what="imported entries are entries like any other",
        )

    # races between processes

    def check_processes_racing_on_the_same_keys_agree(self) -> None:
        """The processes take the keys in lockstep. On each, a process begins it twice (an
        attempt, then its retry) and, unless it found the key completed, records an undo and a
        result, as the tool activity does. For each key exactly one begin wins, every start is
        counted once, and every process sees the first undo and the first result."""
        ledger, ns = self.open_ledger(), _ns()
        keys = [f"{ns}/{i}/call" for i in range(self.race_keys)]
        seen = _race(self.open_ledger, _race_keys, [(keys, f"p{n}") for n in range(self.processes)], self.timeout)
        for i, key in enumerate(keys):
            final = ledger.get(key)
            assert final is not None and final.status == EntryStatus.COMPLETED, f"{key!r} ends {final!r}"
            observed = [obs[i] for obs in seen]
            begins = [(tag, status, starts) for tag, begun, _, _ in observed for status, starts in begun]
            winners = [tag for tag, status, _ in begins if status is None]
            assert len(winners) == 1, f"{key!r}: begin returned None to {winners or 'no process'}, not exactly once"
            counted = sorted(starts for _, status, starts in begins if status == EntryStatus.STARTED)
            assert counted == list(range(1, len(counted) + 1)), (
                f"{key!r}: the begins that found it STARTED saw starts={counted}; each must see the count before it"
            )
            assert final.starts == 1 + len(counted), (
                f"{key!r}: starts={final.starts}, but {1 + len(counted)} begins found it unknown or STARTED"
            )
            assert final.undo in [{"by": tag} for tag, *_ in observed], f"{key!r}: undo {final.undo!r} is no write"
            assert final.result in [{"by": tag} for tag, *_ in observed], (
                f"{key!r}: result {final.result!r} is no write"
            )
            for tag, _, undo, result in observed:
                assert undo == final.undo, f"{key!r}: {tag} saw undo {undo!r}, but it ends {final.undo!r}"
                assert result == final.result, f"{key!r}: {tag} saw result {result!r}, but it ends {final.result!r}"

    def check_processes_racing_to_claim_agree(self) -> None:
        """Processes claim the same ids for one new chain at once (a retried run.prepare racing
        the attempt before it): for each id exactly one gets the old chain back, and the old
        chain's entries are set aside once, whole."""
        ledger, ns = self.open_ledger(), _ns()
        ids = [f"{ns}-{i}" for i in range(max(1, self.race_keys // 2))]
        for wf in ids:
            ledger.claim(wf, "chain-1")
            ledger.begin(f"{wf}/1/model")
            ledger.complete(f"{wf}/1/model", {"id": wf})
        seen = _race(self.open_ledger, _race_claims, [(ids,)] * self.processes, self.timeout)
        for i, wf in enumerate(ids):
            returned = [claims[i] for claims in seen]
            assert sorted(returned, key=str) == sorted(["chain-1"] + [None] * (self.processes - 1), key=str), (
                f"{wf!r}: concurrent claims by chain-2 returned {returned}; exactly one must return 'chain-1'"
            )
            assert ledger.get(f"{wf}/1/model") is None
            _expect(
                ledger.get(f"#chain-1#{wf}/1/model"),
                f"#chain-1#{wf}/1/model",
                EntryStatus.COMPLETED,
                starts=1,
                result={"id": wf},
                what="set aside once by racing claims",
            )
            assert ledger.claim(wf, "chain-2") is None, f"{wf!r}: chain-2 owns it after the race"


def _record_name(record: LedgerRecord) -> tuple[str, str]:
    return ("entry", record.key) if isinstance(record, EntryRecord) else ("chain", record.workflow_id)


def _times(record: LedgerRecord) -> tuple[float | None, ...]:
    """A record's times to the millisecond (backends keep them at different precisions)."""
    times = (record.started_at, record.completed_at) if isinstance(record, EntryRecord) else (record.claimed_at,)
    return tuple(None if t is None else round(t, 3) for t in times)


def _race_keys(ledger: Ledger, sync: Callable[[], None], keys: list[str], tag: str) -> list[tuple[Any, ...]]:
    seen = []
    for key in keys:
        sync()
        begun, entry = [], None
        for _ in range(2):
            entry = ledger.begin(key)
            begun.append((None, None) if entry is None else (str(entry.status), entry.starts))
            if entry is not None and entry.status == EntryStatus.COMPLETED:
                break
        if entry is not None and entry.status == EntryStatus.COMPLETED:
            seen.append((tag, begun, entry.undo, entry.result))
            continue
        ledger.set_undo(key, {"by": tag})
        undo = _entry_field(ledger.get(key), "undo")
        ledger.complete(key, {"by": tag})
        seen.append((tag, begun, undo, _entry_field(ledger.get(key), "result")))
    return seen


def _entry_field(entry: Entry | None, name: str) -> Any:
    return None if entry is None else getattr(entry, name)


def _race_claims(ledger: Ledger, sync: Callable[[], None], ids: list[str]) -> list[str | None]:
    claims = []
    for wf in ids:
        sync()
        claims.append(ledger.claim(wf, "chain-2"))
    return claims


# --- the artifact store -------------------------------------------------------------------------


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _blob(seed: str, size: int) -> bytes:
    return random.Random(seed).randbytes(size)


class ArtifactStoreConformance(_Suite):
    """The `ArtifactStore` contract (see the protocol's docstrings), one `check_*` method per rule."""

    def __init__(
        self,
        open_store: Callable[[], ArtifactStore],
        tamper: Callable[[str, bytes], None],
        *,
        large_size: int = 5 * 2**20,
        processes: int = 2,
        race_blobs: int = 16,
        race_blob_size: int = 256 * 2**10,
        timeout: float = 120.0,
    ) -> None:
        self.open_store = open_store
        self.tamper = tamper
        self.large_size = large_size
        self.processes = processes
        self.race_blobs = race_blobs
        self.race_blob_size = race_blob_size
        self.timeout = timeout

    def check_the_same_bytes_get_the_same_digest(self) -> None:
        store, data = self.open_store(), f"{_ns()} hello".encode()
        ref = store.put(data)
        assert ref.digest == _sha(data), f"the digest must be the lowercase hex sha256 of the bytes, not {ref.digest!r}"
        assert ref.size == len(data), f"the ref's size must be {len(data)}, not {ref.size!r}"
        assert store.put(data).digest == ref.digest, "putting the same bytes again gives the same digest"
        other = store.put(data + b"!")
        assert other.digest == _sha(data + b"!") and other.digest != ref.digest, "other bytes, other digest"

    def check_put_is_idempotent(self) -> None:
        data = f"{_ns()} idempotent".encode()
        first, second = self.open_store(), self.open_store()
        refs = [first.put(data), first.put(data), second.put(data, "text/plain"), second.put(data)]
        assert {r.digest for r in refs} == {_sha(data)}, f"one blob, one digest: {refs}"
        assert {r.size for r in refs} == {len(data)}
        for store in (first, second):
            assert store.get(refs[0]) == data, "the blob reads back after repeated puts, from either handle"

    def check_get_returns_the_exact_bytes(self) -> None:
        store, ns = self.open_store(), _ns()
        for data in (
            bytes(range(256)) + ns.encode(),
            b"",
            f"{ns}\r\n\n\x00 \xff".encode("latin-1"),
            f"{ns} naïve ✓".encode(),
        ):
            ref = store.put(data)
            assert ref.digest == _sha(data) and ref.size == len(data)
            got = store.get(ref)
            assert isinstance(got, bytes) and got == data, f"get returned {got[:40]!r}, not the {len(data)} bytes put"

    def check_a_ref_carries_the_media_type_and_get_needs_only_the_digest(self) -> None:
        store, data = self.open_store(), f'{{"ns": "{_ns()}"}}'.encode()
        default = store.put(data)
        assert default.media_type == "application/octet-stream", f"the default media type, not {default.media_type!r}"
        typed = store.put(data, "text/x-diff; charset=utf-8")
        assert typed.media_type == "text/x-diff; charset=utf-8", (
            f"put must return the media type given, not {typed.media_type!r}"
        )
        assert typed.digest == default.digest, "the media type is not part of the blob's name"
        for ref in (
            typed,
            ArtifactRef(digest=default.digest),
            ArtifactRef.json(default.digest),
            ArtifactRef(digest=default.digest, size=None, media_type="image/png"),
        ):
            assert store.get(ref) == data, f"get must use only the digest, not the size or media type of {ref}"
        value = {"ns": data.decode(), "list": [1, "✓", None], "nested": {"a": True}}
        ref = put_json(store, value)
        assert ref.media_type == "application/json" and get_json(store, ArtifactRef.json(ref.digest)) == value

    def check_a_missing_blob_raises_artifact_missing_naming_the_digest(self) -> None:
        store, digest = self.open_store(), _sha(f"{_ns()} never put".encode())
        try:
            data = store.get(ArtifactRef(digest=digest))
        except ArtifactCorrupt as exc:
            raise AssertionError(f"a blob that was never put is missing, not corrupt: {exc}") from exc
        except ArtifactMissing as exc:
            assert digest in str(exc), f"the error must name the digest {digest}: {exc}"
        else:
            raise AssertionError(f"get of a blob never put returned {data[:40]!r} instead of raising ArtifactMissing")

    def check_a_corrupt_blob_is_detected_not_returned(self) -> None:
        store, ns = self.open_store(), _ns()
        other = store.put(f"{ns} another blob".encode())
        corruptions = {
            "one byte changed": lambda data: data[:-1] + bytes([data[-1] ^ 1]),
            "truncated": lambda data: data[: len(data) // 2],
            "empty": lambda data: b"",
            "another blob's bytes": lambda data: store.get(other),
        }
        for what, corrupt in corruptions.items():
            data = f"{ns} corrupted: {what}".encode() * 50
            ref = store.put(data)
            self.tamper(ref.digest, corrupt(data))
            try:
                got = store.get(ref)
            except ArtifactCorrupt as exc:
                assert ref.digest in str(exc), f"the error must name the digest {ref.digest}: {exc}"
            except ArtifactMissing as exc:
                raise AssertionError(f"{what}: a corrupt blob must raise ArtifactCorrupt, not {exc!r}") from exc
            else:
                raise AssertionError(
                    f"{what}: get returned {len(got)} bytes of a corrupt blob instead of raising ArtifactCorrupt"
                )

    def check_a_large_blob_round_trips(self) -> None:
        store, data = self.open_store(), _blob(_ns(), self.large_size)
        ref = store.put(data)
        assert ref.digest == _sha(data) and ref.size == len(data)
        assert self.open_store().get(ArtifactRef(digest=ref.digest)) == data, (
            f"a {len(data)}-byte blob reads back whole"
        )

    def check_a_malformed_digest_is_rejected(self) -> None:
        store = self.open_store()
        real = store.put(f"{_ns()} target".encode()).digest
        for digest in (
            "",
            "abc",
            real[:63],
            real + "0",
            real.upper(),
            real[:63] + "g",
            f"../{real[3:]}",
            f"{real[:2]}/{real[3:]}",
            f"/{real[1:]}",
            real[:63] + "\n",
            f" {real[1:]}",
        ):
            try:
                got = store.get(ArtifactRef(digest=digest))
            except ValueError:
                continue
            except ArtifactMissing as exc:
                raise AssertionError(f"digest {digest!r} is not 64 lowercase hex: ValueError, not {exc!r}") from exc
            raise AssertionError(f"digest {digest!r} is not 64 lowercase hex, yet get returned {got[:40]!r}")

    def check_digests_lists_every_blob_once(self) -> None:
        first, second, ns = self.open_store(), self.open_store(), _ns()
        refs = [first.put(f"{ns} listed {i}".encode()) for i in range(3)] + [
            second.put(b""),
            second.put(_blob(ns, 4096)),
        ]
        first.put(f"{ns} listed 0".encode())
        listed = list(self.open_store().digests())
        assert len(listed) == len(set(listed)), "digests must list each blob once"
        for digest in listed:
            assert isinstance(digest, str) and DIGEST.fullmatch(digest), f"{digest!r} is not a digest"
        missing = [ref.digest for ref in refs if ref.digest not in listed]
        assert not missing, f"blobs put through either handle are not listed: {missing}"
        assert _sha(f"{ns} never put".encode()) not in listed, "a blob never put is listed"

    def check_processes_writing_the_same_blobs_agree(self) -> None:
        """The processes take the blobs in lockstep. On each, one process puts it while the others
        read it until it is there, then put it too; every process then reads it back. No read gets
        part of a blob (writes are atomic) and concurrent writers of one blob cannot corrupt it."""
        ns = _ns()
        seeds = [f"{ns}-{i}" for i in range(self.race_blobs)]
        args = [(seeds, self.race_blob_size, n, self.processes) for n in range(self.processes)]
        for problems in _race(self.open_store, _race_blobs, args, self.timeout):
            assert not problems, f"a process racing to put the same blobs read: {problems}"
        store = self.open_store()
        for seed in seeds:
            data = _blob(seed, self.race_blob_size)
            assert store.get(ArtifactRef(digest=_sha(data))) == data, f"blob {seed} is whole after the race"


def _race_blobs(
    store: ArtifactStore, sync: Callable[[], None], seeds: list[str], size: int, index: int, processes: int
) -> list[str]:
    problems = []

    def read(seed: str, data: bytes, when: str) -> bool:
        """Whether the blob was there; a partial or wrong blob is a problem."""
        try:
            got = store.get(ArtifactRef(digest=_sha(data)))
        except ArtifactCorrupt as exc:
            problems.append(f"{seed} {when}: {exc}")
            return True
        except ArtifactMissing:
            return False
        if got != data:
            problems.append(f"{seed} {when}: {len(got)} bytes that are not the blob")
        return True

    for i, seed in enumerate(seeds):
        data = _blob(seed, size)
        sync()
        if i % processes != index:  # another process is putting it: read while it writes
            deadline = time.monotonic() + 5
            while not read(seed, data, "while another process put it") and time.monotonic() < deadline:
                pass
        ref = store.put(data)
        if ref.digest != _sha(data):
            problems.append(f"{seed}: put returned digest {ref.digest}")
        elif not read(seed, data, "after its put"):
            problems.append(f"{seed}: missing after its put")
    return problems


# --- running a function in several processes at once ---------------------------------------------


def _race(
    open_handle: Callable[[], Any], work: Callable[..., Any], args: list[tuple[Any, ...]], timeout: float
) -> list[Any]:
    """`work(open_handle(), sync, *args[i])` in one spawned process per `args[i]`; their return
    values, in the order of `args`. `sync()` returns when every process has called it: `work`
    calls it before each item, so the processes take the items in lockstep."""
    ctx = multiprocessing.get_context("spawn")
    barrier, queue = ctx.Barrier(len(args)), ctx.Queue()
    procs = [
        ctx.Process(target=_racer, args=(i, open_handle, work, a, barrier, queue, timeout), daemon=True)
        for i, a in enumerate(args)
    ]
    for proc in procs:
        proc.start()
    results: dict[int, Any] = {}
    failures: list[str] = []
    try:
        for _ in procs:
            try:
                index, ok, value = queue.get(timeout=timeout)
            except Exception:
                silent = [f"process {i}: exit code {p.exitcode}" for i, p in enumerate(procs) if i not in results]
                failures.append(f"no report within {timeout}s from {', '.join(silent)}")
                break
            results[index] = value
            if not ok:
                failures.append(f"process {index} failed:\n{value}")
    finally:
        for proc in procs:
            proc.join(timeout=10)
            if proc.is_alive():
                proc.kill()
                proc.join()
    assert not failures, "racing processes failed (a BrokenBarrierError means another process failed first):\n" + (
        "\n".join(failures)
    )
    return [results[i] for i in range(len(args))]


def _racer(
    index: int,
    open_handle: Callable[[], Any],
    work: Callable[..., Any],
    args: tuple[Any, ...],
    barrier: Any,
    queue: Any,
    timeout: float,
) -> None:
    try:
        handle = open_handle()
        queue.put((index, True, work(handle, lambda: barrier.wait(timeout), *args)))
    except BaseException:
        queue.put((index, False, f"pid {os.getpid()}: {traceback.format_exc()}"))
        barrier.abort()  # the others stop waiting for this one
