"""`ratchet migrate-stores`: copy a ledger and an artifact store into other backends.

    ratchet migrate-stores --to-ledger postgresql://ratchet:PW@db/ratchet --to-artifacts s3://bucket/ratchet

The source defaults to the stores in effect (RATCHET_LEDGER_URL / RATCHET_ARTIFACT_URL, else
RATCHET_LEDGER_PATH / RATCHET_ARTIFACT_DIR); any pair of store URLs works. Everything goes
through the store protocols: the ledger's `export` and `import_entries` (every entry and chain,
times included), the artifact stores' `digests`, `get` and `put`.

- The source is only read, never changed or deleted; a source SQLite file or artifact directory
  that does not exist is an error (a typo must not migrate an empty ledger).
- Safe to run again: a destination row equal to the source's is "already there", a blob the
  destination lists is "already there"; nothing is written twice.
- A destination row under the same key but different (status, result, undo record or start
  count) is a **conflict**: it is kept, never overwritten, reported by key, and the command exits 1
  after copying everything else. So does a source blob that is corrupt or vanished.
- Every copied blob is read back from the destination, which checks its sha256.
- `--dry-run` reports the same counts and writes nothing (a Postgres destination's tables are
  still created, as a worker's first start would).

Stop (or drain) every worker that uses the source stores first: rows written while the command
runs may be missed. Exit status: 0 all copied or already there, 1 conflicts or unreadable blobs,
2 a store could not be opened or failed midway (the message names it; run again once it is fixed).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from typing import Any, TypeVar

from ratchet.contracts import ArtifactRef
from ratchet.core.settings_errors import SettingsError, mask_url
from ratchet.ops.settings import load_settings
from ratchet.stores.artifacts import ArtifactMissing, ArtifactStore
from ratchet.stores.ledger import EntryRecord, ImportOutcome, Ledger
from ratchet.stores.urls import artifact_dir, ledger_path, open_artifacts, open_ledger

__all__ = ["ArtifactCounts", "Counts", "StoreFailed", "copy_artifacts", "copy_ledger", "main"]

COMMAND = "ratchet migrate-stores"
LEDGER_BATCH = 500
"""Records per `import_entries` call (one transaction each)."""
SHOWN_CONFLICTS = 20
"""Conflicting keys printed; the count covers all of them."""

T = TypeVar("T")


class StoreFailed(Exception):
    """A store failed while copying (unreachable, permissions, ...); the message names it."""


@dataclass
class Counts:
    copied: int = 0
    present: int = 0
    conflicts: list[str] = field(default_factory=list)

    def add(self, outcome: ImportOutcome, name: str) -> None:
        if outcome == ImportOutcome.COPIED:
            self.copied += 1
        elif outcome == ImportOutcome.PRESENT:
            self.present += 1
        else:
            self.conflicts.append(name)


@dataclass
class ArtifactCounts:
    copied: int = 0
    present: int = 0
    bytes_copied: int = 0
    unreadable: list[str] = field(default_factory=list)
    """Source blobs that could not be copied: the store's message for each (corrupt, vanished)."""


def copy_ledger(
    source: Ledger,
    destination: Ledger,
    *,
    dry_run: bool = False,
    source_name: str = "source ledger",
    destination_name: str = "destination ledger",
) -> dict[str, Counts]:
    """Every entry and chain of `source` into `destination`; counts under "entries" and "chains"."""
    counts = {"entries": Counts(), "chains": Counts()}
    for records in _batches(_guarded(source_name, source.export()), LEDGER_BATCH):
        outcomes = _call(destination_name, destination.import_entries, records, dry_run=dry_run)
        for record, outcome in zip(records, outcomes):
            if isinstance(record, EntryRecord):
                counts["entries"].add(outcome, record.key)
            else:
                counts["chains"].add(outcome, record.workflow_id)
    return counts


def copy_artifacts(
    source: ArtifactStore,
    destination: ArtifactStore,
    *,
    dry_run: bool = False,
    source_name: str = "source artifacts",
    destination_name: str = "destination artifacts",
) -> ArtifactCounts:
    """Every blob of `source` the destination does not list, read back from it once written."""
    counts = ArtifactCounts()
    there = set(_guarded(destination_name, destination.digests()))
    for digest in _guarded(source_name, source.digests()):
        if digest in there:
            counts.present += 1
            continue
        if not dry_run:
            try:
                data = _call(source_name, source.get, ArtifactRef(digest=digest))
            except ArtifactMissing as exc:  # corrupt (its sha256 does not match) or deleted since listed
                counts.unreadable.append(str(exc))
                continue
            ref = _call(destination_name, destination.put, data)
            _call(destination_name, destination.get, ref)  # raises unless the stored bytes hash to the digest
            counts.bytes_copied += len(data)
        counts.copied += 1
    return counts


def _batches(items: Iterable[T], size: int) -> Iterator[list[T]]:
    iterator = iter(items)
    while batch := list(islice(iterator, size)):
        yield batch


def _guarded(name: str, items: Iterator[T]) -> Iterator[T]:
    while True:
        try:
            item = next(items)
        except StopIteration:
            return
        except Exception as exc:
            raise StoreFailed(f"{name}: {type(exc).__name__}: {exc}") from exc
        yield item


def _call(name: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    try:
        return fn(*args, **kwargs)
    except ArtifactMissing:
        raise
    except Exception as exc:
        raise StoreFailed(f"{name}: {type(exc).__name__}: {exc}") from exc


# --- the command ----------------------------------------------------------------------------------


def main(args: argparse.Namespace) -> int:
    if not args.to_ledger and not args.to_artifacts:
        return _fail("give --to-ledger URL, --to-artifacts URL or both")
    try:
        status = 0
        if args.to_ledger:
            status = max(
                status, _migrate_ledger(args.from_ledger or _current().ledger_store_url, args.to_ledger, args.dry_run)
            )
        if args.to_artifacts:
            status = max(
                status,
                _migrate_artifacts(
                    args.from_artifacts or _current().artifact_store_url, args.to_artifacts, args.dry_run
                ),
            )
    except StoreFailed as exc:
        return _fail(f"{exc}; nothing was deleted, run the command again once the store is back")
    except SettingsError as exc:
        return _fail(str(exc))
    if args.dry_run:
        print("dry run: nothing was written")
    return status


def _current() -> Any:
    try:
        return load_settings()
    except SettingsError as exc:
        raise SettingsError(f"the current settings (the default source): {exc}") from None


def _migrate_ledger(source_url: str, destination_url: str, dry_run: bool) -> int:
    source_name, destination_name = (
        f"source ledger {mask_url(source_url)}",
        f"destination ledger {mask_url(destination_url)}",
    )
    if source_url.lower().startswith("sqlite:") and not _named(source_name, ledger_path, source_url).is_file():
        raise SettingsError(f"{source_name}: no such file {ledger_path(source_url)}; nothing to migrate")
    source = _named(source_name, open_ledger, source_url)
    destination = _named(destination_name, open_ledger, destination_url)
    try:
        counts = copy_ledger(
            source, destination, dry_run=dry_run, source_name=source_name, destination_name=destination_name
        )
    finally:
        for ledger in (source, destination):
            getattr(ledger, "close", lambda: None)()
    verb = "would copy" if dry_run else "copied"
    print(f"ledger {mask_url(source_url)} -> {mask_url(destination_url)}")
    conflicts = 0
    for kind, count in counts.items():
        print(f"  {kind}: {count.copied} {verb}, {count.present} already there, {len(count.conflicts)} conflicts")
        conflicts += len(count.conflicts)
        for name in count.conflicts[:SHOWN_CONFLICTS]:
            print(f"    conflict: {kind[:-1]} {name!r} differs in the destination (kept as it is)", file=sys.stderr)
    if conflicts:
        _say(
            f"{destination_name}: {conflicts} conflicts: it holds different rows under keys the source has; "
            "they were not overwritten (compare them, then delete or keep the destination's)"
        )
    return 1 if conflicts else 0


def _migrate_artifacts(source_url: str, destination_url: str, dry_run: bool) -> int:
    source_name = f"source artifacts {mask_url(source_url)}"
    destination_name = f"destination artifacts {mask_url(destination_url)}"
    if source_url.lower().startswith("file:") and not _named(source_name, artifact_dir, source_url).is_dir():
        raise SettingsError(f"{source_name}: no such directory {artifact_dir(source_url)}; nothing to migrate")
    source = _named(source_name, open_artifacts, source_url)
    destination = _named(destination_name, open_artifacts, destination_url)
    counts = copy_artifacts(
        source, destination, dry_run=dry_run, source_name=source_name, destination_name=destination_name
    )
    print(f"artifacts {mask_url(source_url)} -> {mask_url(destination_url)}")
    verb = "would copy" if dry_run else f"copied ({counts.bytes_copied} bytes)"
    print(f"  blobs: {counts.copied} {verb}, {counts.present} already there, {len(counts.unreadable)} unreadable")
    for problem in counts.unreadable[:SHOWN_CONFLICTS]:
        print(f"    unreadable: {problem}", file=sys.stderr)
    if counts.unreadable:
        _say(
            f"{source_name}: {len(counts.unreadable)} blobs could not be read (corrupt or deleted) and were not copied"
        )
    return 1 if counts.unreadable else 0


def _named(name: str, fn: Callable[[str], T], url: str) -> T:
    """`fn(url)`, its failure (a SettingsError naming RATCHET_*_URL, or anything else) prefixed with
    which store of the migration it is."""
    try:
        return fn(url)
    except SettingsError as exc:
        raise SettingsError(f"{name}: {exc}") from None
    except Exception as exc:
        raise SettingsError(f"{name}: {type(exc).__name__}: {exc}") from None


def _say(message: str) -> None:
    print(f"{COMMAND}: {message}", file=sys.stderr, flush=True)


def _fail(message: str) -> int:
    _say(message)
    return 2
