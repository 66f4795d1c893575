"""PostgresLedger against a real PostgreSQL server (tests/servers.py): the Ledger conformance suite
(ratchet/testing/stores.py), each check on a fresh database, then what only Postgres has: the
schema, start-up errors naming RATCHET_LEDGER_URL, a server that drops connections or stops
answering. And the URLs behind RATCHET_LEDGER_URL / RATCHET_ARTIFACT_URL (ratchet/stores/urls.py):
defaults, schemes, masking."""

from __future__ import annotations

import sys
import threading
import time
import uuid
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from pydantic import SecretStr

from ratchet.ops.settings import Settings, SettingsError, mask_url
from ratchet.stores import postgres_ledger
from ratchet.stores.artifacts import DirectoryArtifactStore
from ratchet.stores.ledger import EntryStatus, SqliteLedger
from ratchet.stores.postgres_ledger import LedgerUnavailable, PostgresLedger
from ratchet.stores.urls import artifact_dir, ledger_path, open_artifacts, open_ledger
from ratchet.testing.stores import LedgerConformance

pytestmark = pytest.mark.e2e  # processes as a user runs them: `make test-e2e`, not `make test`

if TYPE_CHECKING:
    from tests.servers import LocalPostgres


def _refused_port() -> int:
    """A port on 127.0.0.1 where nothing listens."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def shared_database(postgres_server: LocalPostgres) -> str:
    return postgres_server.create_database().rsplit("/", 1)[1]


@pytest.fixture
def database(shared_database: str, postgres_server: LocalPostgres) -> str:
    """The URL of a new, empty schema (the URL's search_path; a new schema takes a millisecond, a
    new database half a second); its application_name is the schema's name."""
    return postgres_server.create_schema(shared_database)


def _application(url: str) -> str:
    return url.rsplit("application_name=", 1)[1]


# --- the conformance suite ----------------------------------------------------------------------


@pytest.mark.parametrize("check", LedgerConformance.checks())
def test_conformance(check: str, database: str):
    LedgerConformance(partial(PostgresLedger, database)).run(check)


# --- what only Postgres has ---------------------------------------------------------------------


def test_the_schema_keeps_json_as_text_and_keys_byte_exact(database: str, postgres_server: LocalPostgres):
    """JSON as text (jsonb cannot hold \\u0000), keys and workflow ids in the "C" collation."""
    with PostgresLedger(database):
        pass
    import psycopg

    with psycopg.connect(database) as conn:
        columns = dict(conn.execute(
            "SELECT table_name || '.' || column_name, data_type || coalesce(' ' || collation_name, '')"
            " FROM information_schema.columns WHERE table_schema = current_schema()"
        ).fetchall())
    assert columns == {
        "ratchet_ledger.key": "text C", "ratchet_ledger.status": "text", "ratchet_ledger.undo": "text",
        "ratchet_ledger.result": "text", "ratchet_ledger.starts": "integer",
        "ratchet_ledger.started_at": "timestamp with time zone", "ratchet_ledger.completed_at": "timestamp with time zone",
        "ratchet_chains.workflow_id": "text C", "ratchet_chains.chain": "text",
        "ratchet_chains.claimed_at": "timestamp with time zone",
    }, columns


def test_workers_starting_at_once_create_the_schema_once_and_keep_entries(database: str):
    """Eight handles opened at once on an empty database (workers starting together) all work;
    opening again keeps what is there."""
    handles: list[PostgresLedger] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(8)

    def open_one() -> None:
        try:
            barrier.wait(10)
            handles.append(PostgresLedger(database))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not errors and len(handles) == 8, errors
    handles[0].begin("wf/1/a")
    handles[1].complete("wf/1/a", {"ok": True})
    for handle in handles:
        handle.close()
    with PostgresLedger(database) as reopened:
        entry = reopened.get("wf/1/a")
    assert entry is not None and entry.status == EntryStatus.COMPLETED and entry.result == {"ok": True}


def test_a_handle_uses_a_small_pool_and_closes_it(database: str, postgres_server: LocalPostgres):
    def connections() -> int:
        with postgres_server.admin() as conn:
            return conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (_application(database),),
            ).fetchone()[0]

    ledger = PostgresLedger(database)
    for i in range(50):
        ledger.begin(f"wf/{i}/a")
    assert 1 <= connections() <= postgres_ledger.POOL_MAX_SIZE
    ledger.close()
    deadline = time.monotonic() + 5
    while connections() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert connections() == 0


def test_connections_use_read_committed_and_bounded_statements_whatever_the_server_default(database: str):
    """The statements rely on READ COMMITTED (each sees what committed before it); a database
    whose default is SERIALIZABLE would fail racing begins and claims."""
    strict = database.replace("options=-csearch_path%3D", "options=-cdefault_transaction_isolation%3Dserializable%20-csearch_path%3D")
    with PostgresLedger(strict) as ledger, ledger._pool.connection() as conn:
        shown = [conn.execute(f"SHOW {name}").fetchone()[0] for name in (
            "transaction_isolation", "statement_timeout", "idle_in_transaction_session_timeout", "search_path")]
    assert shown == ["read committed", "10s", "30s", database.split("%3D")[1].split("&")[0]], shown


def test_a_dropped_connection_raises_then_the_next_call_reconnects(database: str, postgres_server: LocalPostgres):
    """A server restart or failover drops every connection: the call in flight raises
    (retryable) instead of hanging, and the next one gets a new connection."""
    with PostgresLedger(database) as ledger:
        ledger.begin("wf/1/a")
        with postgres_server.admin() as conn:
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
                (_application(database),),
            )
        with pytest.raises(LedgerUnavailable, match="ledger get of 'wf/1/a'") as failed:
            ledger.get("wf/1/a")
        assert postgres_server.password not in str(failed.value)
        entry = ledger.get("wf/1/a")
    assert entry is not None and entry.status == EntryStatus.STARTED


def test_a_server_that_stops_answering_makes_the_call_raise_not_hang(
    database: str, postgres_server: LocalPostgres, monkeypatch: pytest.MonkeyPatch,
):
    """A frozen server (SIGSTOP: the connection stays open, nothing answers) is what timeouts on
    the server cannot catch; the client-side deadline does (15 s; 1 s here)."""
    monkeypatch.setattr(postgres_ledger, "CLIENT_DEADLINE_S", 1.0)
    with PostgresLedger(database) as ledger:
        ledger.begin("wf/1/a")
        postgres_server.pause()
        try:
            began = time.monotonic()
            with pytest.raises(LedgerUnavailable, match="no answer within 1 s"):
                ledger.complete("wf/1/a", {"ok": True})
            waited = time.monotonic() - began
        finally:
            postgres_server.resume()
        assert 0.9 < waited < 3, waited
        ledger.complete("wf/1/a", {"ok": True})
        entry = ledger.get("wf/1/a")
    assert entry is not None and entry.status == EntryStatus.COMPLETED


# --- start-up errors name RATCHET_LEDGER_URL ----------------------------------------------------


def test_an_unreachable_server_fails_at_open_naming_the_variable():
    url = f"postgresql://ratchet:hunter2-secret@127.0.0.1:{_refused_port()}/ratchet"
    began = time.monotonic()
    with pytest.raises(SettingsError) as failed:
        open_ledger(url)
    message = str(failed.value)
    assert time.monotonic() - began < 5
    assert message.startswith("RATCHET_LEDGER_URL='postgresql://ratchet:****@127.0.0.1:"), message
    assert "Connection refused" in message and "hunter2-secret" not in message, message


def test_wrong_credentials_and_a_missing_database_fail_at_open(postgres_server: LocalPostgres):
    with pytest.raises(SettingsError, match="RATCHET_LEDGER_URL=.*password authentication failed") as failed:
        PostgresLedger(postgres_server.url(password="wrong-secret"))
    assert "wrong-secret" not in str(failed.value)
    with pytest.raises(SettingsError, match='RATCHET_LEDGER_URL=.*database "no_such_db" does not exist') as failed:
        PostgresLedger(postgres_server.url("no_such_db"))
    assert postgres_server.password not in str(failed.value)


@pytest.mark.parametrize("url", ["postgresql://u:pw-secret@host:notaport/db", "postgresql://u:pw-secret@h/db?nosuchoption=1"])
def test_a_malformed_postgres_url_fails_naming_the_variable(url: str):
    with pytest.raises(SettingsError, match=r"RATCHET_LEDGER_URL='postgresql://u:\*\*\*\*@") as failed:
        open_ledger(url)
    assert "pw-secret" not in str(failed.value)


def test_without_psycopg_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(postgres_ledger, "psycopg", None)
    with pytest.raises(SettingsError, match=r"RATCHET_LEDGER_URL=.*pip install 'ratchet-agents\[postgres\]'"):
        open_ledger("postgresql://u:pw@127.0.0.1:1/db")


async def test_the_worker_stops_at_start_when_the_ledger_is_unreachable(tmp_path: Path):
    """`serve` (python -m ratchet.worker) opens the stores before it connects to Temporal; its
    SettingsError makes the process print it and exit 2 (tests/ops/test_ops_settings.py)."""
    from ratchet.worker.main import serve

    settings = Settings(
        ledger_url=SecretStr(f"postgresql://ratchet:hunter2-secret@127.0.0.1:{_refused_port()}/ratchet"),
        artifact_dir=tmp_path / "a", temporal_address=f"127.0.0.1:{_refused_port()}",
    )
    with pytest.raises(SettingsError) as failed:
        await serve(settings)
    message = str(failed.value)
    assert message.startswith("RATCHET_LEDGER_URL='postgresql://ratchet:****@127.0.0.1:"), message
    assert "Connection refused" in message and "hunter2-secret" not in message, message


# --- the URLs ------------------------------------------------------------------------------------


def test_the_defaults_are_the_path_settings_as_urls(tmp_path: Path):
    default = Settings()
    assert default.ledger_store_url == "sqlite:///.ratchet/ledger.sqlite3"
    assert default.artifact_store_url == "file:.ratchet/artifacts"
    assert ledger_path(default.ledger_store_url) == default.ledger_path
    assert artifact_dir(default.artifact_store_url) == default.artifact_dir
    odd = Settings(ledger_path=tmp_path / "a b#c%d" / "l.sqlite3", artifact_dir=tmp_path / "x?y" / "art")
    assert odd.ledger_store_url.startswith("sqlite:////") and odd.artifact_store_url.startswith("file:///")
    assert ledger_path(odd.ledger_store_url) == odd.ledger_path
    assert artifact_dir(odd.artifact_store_url) == odd.artifact_dir
    ledger, artifacts = open_ledger(odd.ledger_store_url), open_artifacts(odd.artifact_store_url)
    assert isinstance(ledger, SqliteLedger) and ledger.path == odd.ledger_path and odd.ledger_path.exists()
    assert isinstance(artifacts, DirectoryArtifactStore) and artifacts.root == odd.artifact_dir


@pytest.mark.parametrize(("url", "path"), [
    ("sqlite:///rel/ledger.sqlite3", "rel/ledger.sqlite3"),
    ("sqlite:////abs/ledger.sqlite3", "/abs/ledger.sqlite3"),
    ("SQLite:///x%20y.sqlite3", "x y.sqlite3"),
])
def test_sqlite_urls(url: str, path: str):
    assert ledger_path(url) == Path(path)


@pytest.mark.parametrize(("url", "path"), [
    ("file:///srv/artifacts", "/srv/artifacts"),
    ("file://localhost/srv/artifacts", "/srv/artifacts"),
    ("file:rel/artifacts", "rel/artifacts"),
    ("file:///a%23b", "/a#b"),
])
def test_file_urls(url: str, path: str):
    assert artifact_dir(url) == Path(path)


@pytest.mark.parametrize(("opener", "url", "says"), [
    (open_ledger, "mysql://u:pw-secret@h/db", "RATCHET_LEDGER_URL='mysql://u:****@h/db': unknown scheme 'mysql'"),
    (open_ledger, "/var/lib/ledger.sqlite3", "RATCHET_LEDGER_URL='/var/lib/ledger.sqlite3': not a URL"),
    (open_ledger, "host=db user=u password=pw-secret dbname=x", "RATCHET_LEDGER_URL='host=db user=u password=**** dbname=x': not a URL"),
    (open_ledger, "sqlite://host/ledger.sqlite3", "RATCHET_LEDGER_URL='sqlite://host/ledger.sqlite3': a sqlite URL has three slashes"),
    (open_ledger, "sqlite:///l.sqlite3?mode=ro", "RATCHET_LEDGER_URL='sqlite:///l.sqlite3?mode=ro': no query"),
    (open_ledger, "", "RATCHET_LEDGER_URL='': empty"),
    (open_ledger, " sqlite:///x", "leading or trailing spaces"),
    (open_artifacts, "ftp://bucket/prefix", "RATCHET_ARTIFACT_URL='ftp://bucket/prefix': unknown scheme 'ftp'"),
    (open_artifacts, "file://otherhost/srv", "RATCHET_ARTIFACT_URL='file://otherhost/srv': host 'otherhost'"),
    (open_artifacts, "file:", "RATCHET_ARTIFACT_URL='file:': no path"),
    (open_artifacts, "s3://u:pw-secret@bucket/p", "RATCHET_ARTIFACT_URL='s3://"),
])
def test_a_bad_url_names_its_variable_and_hides_the_password(opener, url: str, says: str):
    with pytest.raises(SettingsError) as failed:
        opener(url)
    assert says in str(failed.value), str(failed.value)
    assert "pw-secret" not in str(failed.value)


@pytest.mark.parametrize(("url", "extra"), [("s3://bucket/p", "s3"), ("gs://bucket/p", "gcs"), ("az://container/p", "azure")])
def test_the_object_store_is_imported_only_for_its_urls_and_its_absence_is_named(
    url: str, extra: str, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setitem(sys.modules, "obstore", None)  # as if the extra were not installed
    monkeypatch.delitem(sys.modules, "ratchet.stores.object_artifacts", raising=False)
    scheme = url.partition(":")[0]
    with pytest.raises(SettingsError) as failed:
        open_artifacts(url)
    assert str(failed.value).startswith(
        f"RATCHET_ARTIFACT_URL={url!r}: a {scheme}:// URL needs `pip install 'ratchet-agents[{extra}]'` for the object "
        "artifact store (ratchet.stores.object_artifacts), which cannot be imported: "
    ), str(failed.value)
    assert isinstance(open_artifacts("file:///tmp/ratchet-unused-" + uuid.uuid4().hex), DirectoryArtifactStore)


@pytest.mark.parametrize(("url", "shown"), [
    ("postgresql://ratchet:s3cr3t-pw@db:5432/ratchet", "postgresql://ratchet:****@db:5432/ratchet"),
    ("postgresql://ratchet:p@ss/w0rd@db/ratchet", "postgresql://ratchet:****@db/ratchet"),
    ("postgresql://ratchet@db/ratchet?sslmode=require&password=s3cr3t-pw", "postgresql://ratchet@db/ratchet?sslmode=require&password=****"),
    ("postgresql://ratchet@db/ratchet", "postgresql://ratchet@db/ratchet"),
    ("s3://bucket/prefix", "s3://bucket/prefix"),
    ("sqlite:///.ratchet/ledger.sqlite3", "sqlite:///.ratchet/ledger.sqlite3"),
])
def test_mask_url(url: str, shown: str):
    assert mask_url(url) == shown


def test_config_shows_the_store_urls_with_the_password_masked():
    settings = Settings(ledger_url=SecretStr("postgresql://ratchet:s3cr3t-pw@db:5432/ratchet"),
                        artifact_url="s3://bucket/artifacts")
    shown = settings.masked()
    assert shown["ledger_url"] == "postgresql://ratchet:****@db:5432/ratchet"
    assert shown["artifact_url"] == "s3://bucket/artifacts"
    assert "s3cr3t-pw" not in repr(shown) and "s3cr3t-pw" not in repr(settings)
    defaults = Settings().masked()
    assert defaults["ledger_url"] == "sqlite:///.ratchet/ledger.sqlite3"
    assert defaults["artifact_url"] == "file:.ratchet/artifacts"


def test_from_settings_opens_the_stores_the_urls_name(database: str, tmp_path: Path):
    from ratchet.plugin import RatchetOptions

    options = RatchetOptions.from_settings(Settings(
        ledger_url=SecretStr(database), artifact_url=(tmp_path / "blobs").as_uri(), ledger_path=tmp_path / "unused.sqlite3",
    ))
    assert isinstance(options.ledger, PostgresLedger) and isinstance(options.artifacts, DirectoryArtifactStore)
    assert options.artifacts.root == tmp_path / "blobs" and not (tmp_path / "unused.sqlite3").exists()
    options.ledger.close()
    defaults = RatchetOptions.from_settings(Settings(ledger_path=tmp_path / "l.sqlite3", artifact_dir=tmp_path / "a"))
    assert isinstance(defaults.ledger, SqliteLedger) and defaults.ledger.path == tmp_path / "l.sqlite3"
    assert isinstance(defaults.artifacts, DirectoryArtifactStore) and defaults.artifacts.root == tmp_path / "a"
