"""`ratchet migrate-stores` (ratchet/stores/migrate.py), run as a user runs it: a SQLite ledger and an
artifact directory, filled through the store APIs, copied into a real PostgreSQL (tests/servers.py)
and a real S3-compatible server (SeaweedFS, tests/s3_server.py) by `python -m ratchet.cli`."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from ratchet.contracts import ArtifactRef
from ratchet.stores import postgres_ledger
from ratchet.stores.artifacts import DirectoryArtifactStore, put_json
from ratchet.stores.ledger import EntryRecord, EntryStatus, LedgerRecord, SqliteLedger
from ratchet.stores.object_artifacts import ObjectArtifactStore
from ratchet.stores.postgres_ledger import PostgresLedger

pytestmark = pytest.mark.e2e  # slow: `make test-e2e`, not `make test`

if TYPE_CHECKING:
    from tests.s3_server import SeaweedS3
    from tests.servers import LocalPostgres


BULK = 620
"""Plain completed entries beside the hand-made ones: more than one import batch (500)."""
ODD = {"text": "naïve ✓ 日本語 \x00 \"q\" \\ \n", "numbers": [0, -1, 2**53, 1.5], "nested": {"empty": {}, "l": [None, True]}}


@dataclass
class Source:
    ledger_url: str
    artifact_url: str
    ledger_path: Path
    artifact_dir: Path
    blobs: dict[str, bytes]


@dataclass
class Destination:
    ledger_url: str
    artifact_url: str
    database: str
    schema: str


@pytest.fixture
def source(tmp_path: Path) -> Source:
    """A ledger with entries in every status (undo records, retried starts, a chain set aside by a
    new one, empty and odd JSON) and an artifact directory, written through the store APIs."""
    ledger = SqliteLedger(tmp_path / "source" / "ledger.sqlite3")
    ledger.claim("fix-login", "chain-1")
    ledger.begin("fix-login/1/model")
    ledger.complete("fix-login/1/model", {"reply": "old run"})
    ledger.claim("fix-login", "chain-2")  # the old run's entry moves to #chain-1#fix-login/1/model
    ledger.begin("fix-login/1/model")
    ledger.complete("fix-login/1/model", {"reply": "new run", "usage": {"prompt_tokens": 812}})
    ledger.begin("fix-login/2/call_2_0")
    ledger.set_undo("fix-login/2/call_2_0", {"path": "calc.py", "previous": "def add(a, b):\n    return a - b\n"})
    ledger.complete("fix-login/2/call_2_0", {"ok": True, "output": "wrote 31 bytes"})
    ledger.begin("fix-login/2/call_2_0/undo")
    ledger.complete("fix-login/2/call_2_0/undo", {})
    ledger.begin("fix-login/3/call_3_0")  # outcome unknown: STARTED, retried once, with an undo record
    ledger.set_undo("fix-login/3/call_3_0", ODD)
    ledger.begin("fix-login/3/call_3_0")
    ledger.begin("fix-login/3/call_3_1")  # STARTED, nothing recorded yet
    ledger.begin("other/1/model")  # never claimed
    ledger.complete("other/1/model", ODD)
    for i in range(BULK):
        ledger.begin(f"bulk/{i}/call")
        ledger.complete(f"bulk/{i}/call", {"n": i})

    store = DirectoryArtifactStore(tmp_path / "source" / "artifacts")
    blobs = {}
    for data in (b"", b"diff --git a/calc.py b/calc.py\n", bytes(range(256)) * 4, os.urandom(3 * 2**20)):
        blobs[store.put(data).digest] = data
    ref = put_json(store, {"messages": [{"role": "user", "content": "fix the tests ✓"}]})
    blobs[ref.digest] = store.get(ref)
    (store.root / "ab").mkdir(exist_ok=True)
    (store.root / "ab" / ".tmp-interrupted-write").write_bytes(b"half a blob")  # not a blob: never copied
    return Source(
        ledger_url=f"sqlite:///{ledger.path}", artifact_url=store.root.as_uri(), ledger_path=ledger.path,
        artifact_dir=store.root, blobs=blobs,
    )


@pytest.fixture(scope="module")
def database(postgres_server: LocalPostgres) -> str:
    return postgres_server.create_database().rsplit("/", 1)[1]


@pytest.fixture
def s3(s3_server: SeaweedS3, monkeypatch: pytest.MonkeyPatch) -> SeaweedS3:
    for name in ("AWS_ENDPOINT_URL", "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    for name, value in s3_server.env().items():
        monkeypatch.setenv(name, value)
    return s3_server


@pytest.fixture
def destination(postgres_server: LocalPostgres, database: str, s3: SeaweedS3) -> Destination:
    """An empty Postgres schema and an empty prefix of the S3 bucket."""
    url = postgres_server.create_schema(database)
    return Destination(ledger_url=url, artifact_url=f"s3://{s3.bucket}/migrated-{uuid.uuid4().hex[:12]}",
                       database=database, schema=url.rsplit("application_name=", 1)[1])


def migrate(*args: str) -> subprocess.CompletedProcess[str]:
    """The command, in a process of its own, with the test's AWS_* variables and no RATCHET_* ones."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RATCHET_")}
    return subprocess.run([sys.executable, "-m", "ratchet.cli", "migrate-stores", *args], env=env,
                          capture_output=True, text=True, timeout=120, check=False)


def migrate_all(source: Source, destination: Destination, *extra: str) -> subprocess.CompletedProcess[str]:
    return migrate("--from-ledger", source.ledger_url, "--to-ledger", destination.ledger_url,
                   "--from-artifacts", source.artifact_url, "--to-artifacts", destination.artifact_url, *extra)


def by_name(records: list[LedgerRecord]) -> dict[tuple[str, str], LedgerRecord]:
    return {("entry", r.key) if isinstance(r, EntryRecord) else ("chain", r.workflow_id): r for r in records}


def stored_json(source: Source, destination: Destination, postgres_server: LocalPostgres) -> tuple[dict, dict]:
    """(key -> (status, undo, result, starts)) as each database holds it, JSON as its text."""
    with sqlite3.connect(source.ledger_path) as conn:
        before = {row[0]: row[1:] for row in conn.execute("SELECT key, status, undo, result, starts FROM ledger")}
    with postgres_server.admin(destination.database) as conn:
        rows = conn.execute(f'SELECT key, status, undo, result, starts FROM "{destination.schema}".ratchet_ledger')
        after = {row[0]: row[1:] for row in rows.fetchall()}
    return before, after


def s3_keys(s3: SeaweedS3, url: str) -> list[str]:
    prefix = url.split("/", 3)[3]
    listing = s3.client().list_objects_v2(Bucket=s3.bucket, Prefix=f"{prefix}/")
    return sorted(item["Key"] for item in listing.get("Contents", []))


def counts(out: str, what: str) -> tuple[int, int, int]:
    """(copied, already there, conflicts or unreadable) from the line `  {what}: ...`."""
    line = next(line for line in out.splitlines() if line.strip().startswith(f"{what}:"))
    numbers = [int(word) for word in line.replace("(", " ").split() if word.isdigit()]
    return numbers[0], numbers[-2], numbers[-1]


def test_migrate_copies_everything_exactly_and_a_second_run_copies_nothing(
    source: Source, destination: Destination, s3: SeaweedS3, postgres_server: LocalPostgres,
    monkeypatch: pytest.MonkeyPatch,
):
    exported = list(SqliteLedger(source.ledger_path).export())
    entries = sum(isinstance(r, EntryRecord) for r in exported)
    assert entries == BULK + 7 and len(exported) - entries == 1, "the fixture's ledger: 627 entries, one chain"
    assert {r.status for r in exported if isinstance(r, EntryRecord)} == set(EntryStatus)

    dry = migrate_all(source, destination, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert counts(dry.stdout, "entries") == (entries, 0, 0) and counts(dry.stdout, "chains") == (1, 0, 0)
    assert counts(dry.stdout, "blobs") == (len(source.blobs), 0, 0) and "would copy" in dry.stdout
    assert "nothing was written" in dry.stdout
    with PostgresLedger(destination.ledger_url) as ledger:
        assert list(ledger.export()) == [], "a dry run writes no entry"
    assert s3_keys(s3, destination.artifact_url) == [], "a dry run writes no blob"

    first = migrate_all(source, destination)
    assert first.returncode == 0, first.stderr
    assert counts(first.stdout, "entries") == (entries, 0, 0), first.stdout
    assert counts(first.stdout, "chains") == (1, 0, 0), first.stdout
    assert counts(first.stdout, "blobs") == (len(source.blobs), 0, 0), first.stdout
    assert postgres_server.password not in first.stdout + first.stderr, "the password is never printed"

    # the ledger: every row whole, JSON byte for byte, times to the microsecond
    before, after = stored_json(source, destination, postgres_server)
    assert after == before
    monkeypatch.setattr(postgres_ledger, "EXPORT_PAGE", 7)  # read back across many pages
    with PostgresLedger(destination.ledger_url) as ledger:
        copied = by_name(list(ledger.export()))
        assert copied.keys() == by_name(exported).keys()
        for name, record in by_name(exported).items():
            assert record.same_as(copied[name]), (record, copied[name])  # type: ignore[arg-type]
            times = [(record.started_at, copied[name].started_at), (record.completed_at, copied[name].completed_at)] \
                if isinstance(record, EntryRecord) else [(record.claimed_at, copied[name].claimed_at)]  # type: ignore[union-attr]
            for was, now in times:
                assert (was is None and now is None) or abs(was - now) < 2e-6, (name, was, now)
        # and the copy works as the ledger it is
        retried = ledger.begin("fix-login/2/call_2_0")
        assert retried is not None and retried.result == {"ok": True, "output": "wrote 31 bytes"}
        assert ledger.get("fix-login/3/call_3_0").undo == ODD and ledger.get("fix-login/3/call_3_0").starts == 2
        assert ledger.claim("fix-login", "chain-2") is None, "the chain that owned the id still owns it"

    # the artifacts: exactly the blobs, byte for byte, and no temp file
    store = ObjectArtifactStore.from_url(destination.artifact_url)
    assert sorted(store.digests()) == sorted(source.blobs)
    assert s3_keys(s3, destination.artifact_url) == sorted(store.key(d) for d in source.blobs)
    for digest, data in source.blobs.items():
        assert store.get(ArtifactRef(digest=digest)) == data

    again = migrate_all(source, destination)
    assert again.returncode == 0, again.stderr
    assert counts(again.stdout, "entries") == (0, entries, 0), again.stdout
    assert counts(again.stdout, "chains") == (0, 1, 0), again.stdout
    assert counts(again.stdout, "blobs") == (0, len(source.blobs), 0), again.stdout
    assert "0 copied (0 bytes)" in again.stdout

    # the source is only read
    assert by_name(list(SqliteLedger(source.ledger_path).export())) == by_name(exported)
    assert sorted(DirectoryArtifactStore(source.artifact_dir).digests()) == sorted(source.blobs)


def test_a_different_destination_row_is_a_conflict_and_is_kept(
    source: Source, destination: Destination, postgres_server: LocalPostgres,
):
    """A worker already used the destination: its entry differs from the source's. The command
    copies the rest, keeps that entry, names it and the store, and exits 1; so does every rerun."""
    with PostgresLedger(destination.ledger_url) as ledger:
        assert ledger.begin("fix-login/3/call_3_1") is None
        ledger.complete("fix-login/3/call_3_1", {"ok": True, "output": "done on the new ledger"})
    for attempt in range(2):
        result = migrate("--from-ledger", source.ledger_url, "--to-ledger", destination.ledger_url)
        assert result.returncode == 1, (result.stdout, result.stderr)
        total = BULK + 7
        assert counts(result.stdout, "entries") == ((total - 1, 0, 1) if attempt == 0 else (0, total - 1, 1))
        assert "'fix-login/3/call_3_1'" in result.stderr and "1 conflicts" in result.stderr, result.stderr
        assert "destination ledger postgresql://ratchet:****@" in result.stderr, result.stderr
        assert postgres_server.password not in result.stdout + result.stderr
        with PostgresLedger(destination.ledger_url) as ledger:
            kept = ledger.get("fix-login/3/call_3_1")
        assert kept is not None and kept.status == EntryStatus.COMPLETED
        assert kept.result == {"ok": True, "output": "done on the new ledger"}, "a conflict is never overwritten"
    source_entry = SqliteLedger(source.ledger_path).get("fix-login/3/call_3_1")
    assert source_entry is not None and source_entry.status == EntryStatus.STARTED, "the source is not changed"


def test_a_store_that_cannot_be_used_is_named_and_nothing_is_copied(
    source: Source, destination: Destination, tmp_path: Path, s3: SeaweedS3,
):
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    dead = f"postgresql://ratchet:hunter2-pw@127.0.0.1:{port}/ratchet"
    result = migrate("--from-ledger", source.ledger_url, "--to-ledger", dead)
    assert result.returncode == 2 and "destination ledger postgresql://ratchet:****@127.0.0.1" in result.stderr, result.stderr
    assert "hunter2-pw" not in result.stderr

    missing = migrate("--from-ledger", f"sqlite:///{tmp_path / 'no-such.sqlite3'}", "--to-ledger", destination.ledger_url)
    assert missing.returncode == 2 and "source ledger" in missing.stderr and "no such file" in missing.stderr
    assert not (tmp_path / "no-such.sqlite3").exists(), "a mistyped source is not created"

    no_bucket = migrate("--from-artifacts", source.artifact_url, "--to-artifacts", "s3://ratchet-no-such-bucket/p")
    assert no_bucket.returncode == 2, no_bucket.stderr
    assert "destination artifacts s3://ratchet-no-such-bucket/p" in no_bucket.stderr and "does not exist" in no_bucket.stderr

    nothing = migrate()
    assert nothing.returncode == 2 and "--to-ledger" in nothing.stderr


def test_a_corrupt_source_blob_is_reported_and_the_rest_copied(source: Source, destination: Destination):
    digest, data = next((d, b) for d, b in source.blobs.items() if len(b) == 1024)
    (source.artifact_dir / digest[:2] / digest).write_bytes(data[:-1] + b"!")
    result = migrate("--from-artifacts", source.artifact_url, "--to-artifacts", destination.artifact_url)
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert counts(result.stdout, "blobs") == (len(source.blobs) - 1, 0, 1)
    assert digest in result.stderr and "corrupt" in result.stderr and "source artifacts" in result.stderr
    assert digest not in set(ObjectArtifactStore.from_url(destination.artifact_url).digests())
