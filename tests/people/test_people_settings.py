"""The sign-in settings (ratchet/ops/people_settings.py) and `ratchet users` as a user runs it: a bad
value is an error naming the variable, and the console refuses to start on it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ratchet.cli.main import parser
from ratchet.cli.users import users as users_verb
from ratchet.core.settings_errors import SettingsError
from ratchet.ops.people_settings import load_people_settings
from tests.ops_workers import ROOT

NAMES = ("RATCHET_OIDC_ISSUER", "RATCHET_OIDC_CLIENT_ID", "RATCHET_OIDC_CLIENT_SECRET", "RATCHET_OIDC_SCOPES",
         "RATCHET_TRUSTED_PROXIES", "RATCHET_SESSION_SECRET", "RATCHET_CONSOLE_URL", "RATCHET_ENV_FILE")


@pytest.fixture
def env(monkeypatch):
    for name in NAMES:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.mark.parametrize(
    "values, said",
    [
        ({"RATCHET_OIDC_ISSUER": "https://idp.example"}, "RATCHET_OIDC_CLIENT_ID: required with RATCHET_OIDC_ISSUER"),
        ({"RATCHET_OIDC_CLIENT_ID": "console"}, "RATCHET_OIDC_ISSUER: required with RATCHET_OIDC_CLIENT_ID"),
        ({"RATCHET_OIDC_ISSUER": "http://idp.example", "RATCHET_OIDC_CLIENT_ID": "c"},
         "RATCHET_OIDC_ISSUER: 'http://idp.example': http:// only on loopback"),
        ({"RATCHET_OIDC_ISSUER": "idp.example", "RATCHET_OIDC_CLIENT_ID": "c"}, "RATCHET_OIDC_ISSUER: 'idp.example' is not"),
        ({"RATCHET_OIDC_SCOPES": "profile email"}, "RATCHET_OIDC_SCOPES: 'profile email' must include openid"),
        ({"RATCHET_TRUSTED_PROXIES": "127.0.0.1/32, 10.0.0.1/8"}, "RATCHET_TRUSTED_PROXIES: '10.0.0.1/8' is not"),
        ({"RATCHET_TRUSTED_PROXIES": "proxy.local"}, "RATCHET_TRUSTED_PROXIES: 'proxy.local' is not"),
        ({"RATCHET_SESSION_SECRET": "short"}, "RATCHET_SESSION_SECRET: .*at least 32"),
    ],
)
def test_a_bad_sign_in_setting_is_an_error_naming_it(env, values, said):
    for name, value in values.items():
        env.setenv(name, value)
    with pytest.raises(SettingsError, match=said):
        load_people_settings()


def test_good_settings_read_as_written(env):
    env.setenv("RATCHET_OIDC_ISSUER", "https://idp.example/realms/x/")
    env.setenv("RATCHET_OIDC_CLIENT_ID", "console")
    env.setenv("RATCHET_TRUSTED_PROXIES", "127.0.0.1/32, ::1")
    people = load_people_settings()
    assert people.oidc and people.oidc_issuer == "https://idp.example/realms/x"
    assert [str(n) for n in people.proxy_networks] == ["127.0.0.1/32", "::1/128"]


def users(capsys, *args: str) -> tuple[int, str]:
    """`ratchet users ARGS` as the command line parses it, in this process: its status and output."""
    parsed = parser(["users", *args]).parse_args(["users", *args])
    status = users_verb(parsed)
    return status, capsys.readouterr().out


def test_ratchet_users_adds_lists_and_removes_people(env, tmp_path, capsys):
    env.setenv("RATCHET_LEDGER_URL", f"sqlite:///{tmp_path}/ledger.sqlite3")
    status, added = users(capsys, "add", "alice", "--role", "approver", "--role", "ops")
    assert status == 0 and "alice (approver, ops)" in added
    token = added.strip().splitlines()[-1]
    assert token.startswith("rt_")
    status, again = users(capsys, "add", "alice")
    assert status == 2 and "alice exists already" in again
    status, listed = users(capsys, "list")
    assert status == 0 and listed.startswith("alice\tapprover,ops\t") and token not in listed
    assert users(capsys, "remove", "alice")[0] == 0
    assert users(capsys, "list", "--json")[1].strip() == "[]"
    status, gone = users(capsys, "remove", "alice")
    assert status == 2 and "no user 'alice'" in gone


def test_the_console_does_not_start_on_a_bad_sign_in_setting():
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("RATCHET_")}, "RATCHET_TRUSTED_PROXIES": "nope"}
    done = subprocess.run([sys.executable, "-m", "ratchet.cli.main", "console", "--port", "0"], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "RATCHET_TRUSTED_PROXIES: 'nope'" in done.stderr, done.stdout + done.stderr


def test_the_console_is_wired_from_the_settings(env, tmp_path):
    from ratchet.cli.console import console_guard
    from ratchet.ops.http_guard import GuardSettingsError
    from ratchet.ops.settings import Settings

    settings = Settings(ledger_path=tmp_path / "ledger.sqlite3")
    alone = console_guard(settings, load_people_settings(), "127.0.0.1", [])
    assert alone.authenticator.single_user and alone.oidc is None and alone.authenticator.users is not None
    with pytest.raises(GuardSettingsError, match="RATCHET_OIDC_ISSUER or RATCHET_TRUSTED_PROXIES"):
        console_guard(settings, load_people_settings(), "0.0.0.0", [])
    env.setenv("RATCHET_OIDC_ISSUER", "https://idp.example")
    env.setenv("RATCHET_OIDC_CLIENT_ID", "console")
    env.setenv("RATCHET_TRUSTED_PROXIES", "10.0.0.0/8")
    env.setenv("RATCHET_CONSOLE_URL", "https://console.example")
    team = console_guard(settings, load_people_settings(), "0.0.0.0", [])  # beyond loopback: people sign in
    assert not team.authenticator.single_user and [str(n) for n in team.authenticator.proxies] == ["10.0.0.0/8"]
    assert team.oidc is not None and team.oidc.client.issuer == "https://idp.example"
    assert team.authenticator.console_token is None
