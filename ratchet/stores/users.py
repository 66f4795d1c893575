"""People's API tokens (`ratchet users add NAME --role approver`), in the ledger's database.

A token is `rt_<id>_<secret>`: `id` (12 hex digits) finds the row, `secret` (32 random bytes,
base64url) proves it. The table keeps the SHA-256 of the whole token, never the token, and a
lookup compares digests in constant time (`hmac.compare_digest`). The token is shown once, when it
is made; a lost one is replaced (`remove`, then `add`). Removing a person removes their tokens: the
next request carrying one is refused (nothing is cached).

The table is `ratchet_users` in the database of RATCHET_LEDGER_URL: in the SQLite file beside the
`ledger` and `chains` tables, or in the Postgres database beside `ratchet_ledger`. `open_users`
picks the backend as `open_ledger` does; the SQL is the same for both but for the placeholder.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ratchet.core.settings_errors import SettingsError, mask_url
from ratchet.stores.postgres_tables import SCHEMA_LOCK
from ratchet.stores.urls import LEDGER_SETTING, POSTGRES_SCHEMES, ledger_path

USERS_TABLE = "ratchet_users"
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.@+-]{0,99}$"
ROLE_PATTERN = r"^[A-Za-z0-9*][A-Za-z0-9_.:*-]{0,63}$"
TOKEN_PREFIX = "rt_"
SCHEMA = (
    f"CREATE TABLE IF NOT EXISTS {USERS_TABLE} (name TEXT PRIMARY KEY, token_id TEXT NOT NULL UNIQUE,"
    " digest TEXT NOT NULL, roles TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL)"
)


class UserError(ValueError):
    """A name or role that cannot be, a person who exists already or not at all: nothing changed."""


@dataclass(frozen=True)
class User:
    name: str
    roles: tuple[str, ...]
    created_at: float
    """When `add` made the token, in seconds since the epoch."""


class UserStore(Protocol):
    """What the console, `ratchet serve` and `ratchet users` need of the people's table."""

    def add(self, name: str, roles: list[str]) -> str:
        """Make `name` with `roles`; their token, the only time it is shown. UserError if `name`
        exists or a name or role does not match its pattern."""
        ...

    def everyone(self) -> list[User]:
        """Everyone, by name."""
        ...

    def remove(self, name: str) -> None:
        """Remove `name` and their token; UserError if there is no such person."""
        ...

    def find(self, token: str) -> User | None:
        """The person whose token this is, or None (a malformed, unknown or removed token)."""
        ...


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def check_user(name: str, roles: list[str]) -> None:
    """UserError naming what is wrong with `name` or one of `roles`."""
    if not re.match(NAME_PATTERN, name):
        raise UserError(f"name {name!r}: 1 to 100 of letters, digits and _.@+- (starting with a letter or digit)")
    for role in roles:
        if not re.match(ROLE_PATTERN, role):
            raise UserError(f"role {role!r}: 1 to 64 of letters, digits and _.:*-")


Connect = Callable[[], Any]


class SqlUsers:
    """`UserStore` over a DB-API connection factory: SQLite (`?`) or psycopg (`%s`)."""

    def __init__(self, connect: Connect, placeholder: str, shown: str, schema_lock: str | None = None) -> None:
        self._connect, self._p, self.shown = connect, placeholder, shown
        with self._tx() as cur:
            if schema_lock is not None:  # Postgres: consoles starting at once do not race on the catalog
                cur.execute(schema_lock)
            cur.execute(SCHEMA)

    def __repr__(self) -> str:
        return f"SqlUsers({self.shown})"

    @contextmanager
    def _tx(self) -> Iterator[Any]:
        with closing(self._connect()) as conn:
            cur = conn.cursor()
            try:
                yield cur
                conn.commit()
            except BaseException:
                conn.rollback()
                raise

    def _sql(self, text: str) -> str:
        return text.replace("?", self._p)

    def add(self, name: str, roles: list[str]) -> str:
        check_user(name, roles)
        token_id, secret = secrets.token_hex(6), secrets.token_urlsafe(32)
        token = f"{TOKEN_PREFIX}{token_id}_{secret}"
        with self._tx() as cur:
            cur.execute(self._sql(f"SELECT 1 FROM {USERS_TABLE} WHERE name = ?"), (name,))
            if cur.fetchone() is not None:
                raise UserError(f"{name} exists already: `ratchet users remove {name}` first to give a new token")
            cur.execute(
                self._sql(
                    f"INSERT INTO {USERS_TABLE} (name, token_id, digest, roles, created_at) VALUES (?, ?, ?, ?, ?)"
                ),
                (name, token_id, token_digest(token), json.dumps(sorted(set(roles))), time.time()),
            )
        return token

    def everyone(self) -> list[User]:
        with self._tx() as cur:
            cur.execute(f"SELECT name, roles, created_at FROM {USERS_TABLE} ORDER BY name")
            return [User(name, tuple(json.loads(roles)), float(at)) for name, roles, at in cur.fetchall()]

    def remove(self, name: str) -> None:
        with self._tx() as cur:
            cur.execute(self._sql(f"DELETE FROM {USERS_TABLE} WHERE name = ?"), (name,))
            if cur.rowcount == 0:
                raise UserError(f"there is no user {name!r} (`ratchet users list` shows who there is)")

    def find(self, token: str) -> User | None:
        match = re.fullmatch(TOKEN_PREFIX + r"([0-9a-f]{12})_([A-Za-z0-9_-]{20,100})", token)
        if match is None:
            return None
        with self._tx() as cur:
            cur.execute(
                self._sql(f"SELECT name, digest, roles, created_at FROM {USERS_TABLE} WHERE token_id = ?"),
                (match.group(1),),
            )
            row = cur.fetchone()
        if row is None or not hmac.compare_digest(row[1].encode(), token_digest(token).encode()):
            return None
        return User(row[0], tuple(json.loads(row[2])), float(row[3]))


def open_users(url: str) -> UserStore:
    """The people's table in the database of `url` (RATCHET_LEDGER_URL), created if absent. A URL
    that is neither SQLite nor Postgres, or a database that cannot be used, raises SettingsError."""
    scheme = url.split(":", 1)[0].lower()
    if scheme == "sqlite":
        path = ledger_path(url)
        return SqlUsers(lambda: _sqlite(path), "?", str(path))
    if scheme in POSTGRES_SCHEMES:
        return _postgres(url)
    raise SettingsError(f"{LEDGER_SETTING}={mask_url(url)!r}: no people's table in a {scheme}: database")


def _sqlite(path: Path) -> sqlite3.Connection:
    path.parent.mkdir(parents=True, exist_ok=True)
    return sqlite3.connect(path, timeout=30)


def _postgres(url: str) -> UserStore:
    try:
        import psycopg
    except ImportError:
        raise SettingsError(
            f"{LEDGER_SETTING}={mask_url(url)!r}: a postgresql:// URL needs psycopg: "
            "pip install 'ratchet-agents[postgres]'"
        ) from None
    try:
        lock = f"SELECT pg_advisory_xact_lock({SCHEMA_LOCK})"
        return SqlUsers(lambda: psycopg.connect(url, connect_timeout=10), "%s", mask_url(url), lock)
    except psycopg.Error as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise SettingsError(f"{LEDGER_SETTING}={mask_url(url)!r}: cannot use the database: {first}") from None
