"""People's API tokens (ratchet/stores/users.py) in the ledger's database: the same checks on the
SQLite file and on a real PostgreSQL server (tests/servers.py), beside the ledger's own tables."""

from __future__ import annotations

import hashlib
import sqlite3

import pytest

from ratchet.core.settings_errors import SettingsError
from ratchet.stores.ledger import SqliteLedger
from ratchet.stores.urls import open_ledger
from ratchet.stores.users import USERS_TABLE, UserError, open_users


@pytest.fixture(params=["sqlite", "postgres"])
def ledger_url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/ledger.sqlite3"
    return request.getfixturevalue("postgres_server").create_database()


def test_a_token_names_its_person_until_they_are_removed(ledger_url):
    ledger = open_ledger(ledger_url)  # the ledger's own tables first: the people's sit beside them
    users = open_users(ledger_url)
    alice = users.add("alice", ["approver", "ops", "approver"])
    bob = users.add("bob@example.com", [])
    assert alice.startswith("rt_") and alice != bob and len(alice) > 50
    found = users.find(alice)
    assert found is not None and (found.name, found.roles) == ("alice", ("approver", "ops"))
    assert [(u.name, u.roles) for u in users.everyone()] == [("alice", ("approver", "ops")), ("bob@example.com", ())]
    for wrong in (alice[:-1] + ("A" if alice[-1] != "A" else "B"), alice[:15], "", "Bearer " + alice, bob + "x"):
        assert users.find(wrong) is None
    users.remove("alice")
    assert users.find(alice) is None and users.find(bob).name == "bob@example.com"
    assert open_users(ledger_url).find(bob) is not None  # durable: another handle reads it
    assert ledger.begin("k/1/1") is None  # the ledger goes on as it was


def test_only_the_tokens_digest_is_kept(tmp_path):
    url = f"sqlite:///{tmp_path}/ledger.sqlite3"
    SqliteLedger(tmp_path / "ledger.sqlite3")
    token = open_users(url).add("alice", ["approver"])
    with sqlite3.connect(tmp_path / "ledger.sqlite3") as conn:
        rows = conn.execute(f"SELECT * FROM {USERS_TABLE}").fetchall()
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert tables >= {"ledger", "chains", USERS_TABLE}
    assert hashlib.sha256(token.encode()).hexdigest() in rows[0]
    assert not any(token.split("_")[-1] in str(cell) for cell in rows[0])


def test_bad_names_roles_and_repeats_change_nothing(ledger_url):
    users = open_users(ledger_url)
    users.add("alice", ["approver"])
    for name, roles, said in (
        ("alice", ["ops"], "alice exists already"),
        ("al ice", ["ops"], "name 'al ice'"),
        ("", [], "name ''"),
        ("carol", ["approver", "bad role"], "role 'bad role'"),
    ):
        with pytest.raises(UserError, match=said):
            users.add(name, roles)
    with pytest.raises(UserError, match="no user 'dave'"):
        users.remove("dave")
    assert [(u.name, u.roles) for u in users.everyone()] == [("alice", ("approver",))]


def test_a_database_that_cannot_be_used_is_a_settings_error(postgres_server):
    with pytest.raises(SettingsError, match=r"RATCHET_LEDGER_URL=.*\*\*\*\*.*cannot use the database"):
        open_users(postgres_server.url(password="wrong"))
    with pytest.raises(SettingsError, match="RATCHET_LEDGER_URL"):
        open_users("mysql://x/y")
