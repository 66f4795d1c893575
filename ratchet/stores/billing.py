"""The billing ledger: one row per model attempt, successful or not, in the ledger's database (the
SQLite file at RATCHET_LEDGER_PATH, or the Postgres database at RATCHET_LEDGER_URL), in a table of
its own beside the ledger's (`ratchet_billing`).

A row is keyed by the run, the call's idempotency key, the model choice (0: the run's own, N: its
Nth fallback) and the Temporal attempt: written once (`ON CONFLICT DO NOTHING`), so an activity that
writes its row again after a lost completion changes nothing. The model activity writes it
(activities/billing.py) before it returns or raises.

A sub-agent's rows are its own run's (its workflow id is `{parent's}/.../child`): `rows` of a run
include its sub-agents', which the report (`ratchet cost`) shows under the cause `sub-agent`.
The statements are written once, over `ratchet.stores.memory`'s `Database`s.
"""

from __future__ import annotations

import functools
import time
from dataclasses import astuple, dataclass, fields
from datetime import UTC, datetime
from pathlib import Path

from ratchet.contracts import Billed
from ratchet.stores.memory import Database, PostgresDatabase
from ratchet.stores.sqlite_file import Query, SqliteDatabase

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS ratchet_billing (workflow_id TEXT NOT NULL, run_id TEXT NOT NULL,"
    " call_key TEXT NOT NULL, choice INTEGER NOT NULL, attempt INTEGER NOT NULL, step INTEGER NOT NULL,"
    " cause TEXT NOT NULL, provider TEXT NOT NULL, model TEXT NOT NULL, prompt_tokens INTEGER NOT NULL,"
    " completion_tokens INTEGER NOT NULL, cache_read_tokens INTEGER NOT NULL,"
    " cache_write_tokens INTEGER NOT NULL, cost_usd DOUBLE PRECISION NOT NULL, estimated INTEGER NOT NULL,"
    " priced INTEGER NOT NULL, error TEXT NOT NULL, tenant TEXT NOT NULL, billed_at DOUBLE PRECISION NOT NULL,"
    " PRIMARY KEY (run_id, call_key, choice, attempt))",
    "CREATE INDEX IF NOT EXISTS ratchet_billing_workflow ON ratchet_billing (workflow_id)",
    "CREATE INDEX IF NOT EXISTS ratchet_billing_tenant ON ratchet_billing (tenant, billed_at)",
)


class Cause:
    """Why an attempt was made (a row's `cause`)."""

    ANSWER = "answer"
    RETRY = "retry"
    FALLBACK = "fallback"
    COMPACTION = "compaction"
    JUDGE = "judge"
    SHADOW = "shadow"
    SUB_AGENT = "sub-agent"
    """Only in a report: a sub-agent's rows, as its parent sees them."""


@dataclass(frozen=True)
class BillingRow:
    workflow_id: str
    run_id: str
    call_key: str
    choice: int
    attempt: int
    step: int
    cause: str
    provider: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    cost_usd: float
    estimated: bool
    priced: bool
    error: str = ""
    """Why the attempt failed ("": it answered)."""
    tenant: str = ""
    """The run's tenant ("": none): a tenant's daily cap sums its rows (`spent_since`)."""
    billed_at: float = 0.0

    def billed(self) -> Billed:
        return Billed(
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens,
            cache_read_tokens=self.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens,
            cost_usd=self.cost_usd,
            attempts=1,
            estimated=self.estimated,
            unpriced=not self.priced,
        )


COLUMNS = ", ".join(f.name for f in fields(BillingRow))


class BillingStore:
    def __init__(self, db: Database) -> None:
        self.db = db

        def create(query: Query) -> None:
            for statement in SCHEMA:
                query(statement, ())

        db.transaction("schema", "ratchet_billing schema", create)

    @classmethod
    def sqlite(cls, path: Path) -> BillingStore:
        return cls(SqliteDatabase(Path(path)))

    @staticmethod
    @functools.cache
    def postgres(url: str) -> BillingStore:
        """One store (one small pool) per database URL and process."""
        return BillingStore(PostgresDatabase(url))

    @classmethod
    def open(cls, url: str) -> BillingStore:
        """The store in the ledger's database (`Settings.ledger_store_url`)."""
        from ratchet.stores.urls import ledger_path

        return cls.sqlite(ledger_path(url)) if url.startswith("sqlite") else cls.postgres(url)

    def bill(self, row: BillingRow) -> None:
        """Write the attempt's row, once: a second write of the same attempt changes nothing."""
        values = astuple(row)[:-1] + (row.billed_at or time.time(),)
        marks = ", ".join("?" for _ in values)
        self.db.transaction(
            "bill",
            None,
            lambda q: q(
                f"INSERT INTO ratchet_billing ({COLUMNS}) VALUES ({marks})"
                " ON CONFLICT (run_id, call_key, choice, attempt) DO NOTHING",
                tuple(int(v) if isinstance(v, bool) else v for v in values),
            ),
        )

    def billed(self, run_id: str, call_key: str, choice: int) -> Billed:
        """Every attempt billed so far of one call on one model."""
        rows = self._select("run_id = ? AND call_key = ? AND choice = ?", (run_id, call_key, choice))
        total = Billed()
        for row in rows:
            total = total.add(row.billed())
        return total

    def spent_since(self, tenant: str, since: float) -> float:
        """What `tenant`'s attempts were billed since `since` (epoch seconds), across all its runs."""
        found = self.db.read(
            "tenant total",
            lambda q: q(
                "SELECT COALESCE(SUM(cost_usd), 0) FROM ratchet_billing WHERE tenant = ? AND billed_at >= ?",
                (tenant, since),
            ),
        )
        return float(found[0][0])

    def spent_today(self, tenant: str) -> float:
        """What `tenant` was billed since the UTC day began (its daily cap's running total)."""
        day = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        return self.spent_since(tenant, day.timestamp())

    def rows(self, workflow_id: str) -> list[BillingRow]:
        """A run's rows and its sub-agents', oldest first."""
        prefix = workflow_id.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "/%"
        return self._select("workflow_id = ? OR workflow_id LIKE ? ESCAPE '\\'", (workflow_id, prefix))

    def _select(self, where: str, params: tuple) -> list[BillingRow]:
        found = self.db.read(
            "select",
            lambda q: q(f"SELECT {COLUMNS} FROM ratchet_billing WHERE {where} ORDER BY billed_at, attempt", params),
        )
        return [_row(values) for values in found]


def _row(values: tuple) -> BillingRow:
    row = BillingRow(*values)
    return BillingRow(
        **{**row.__dict__, "estimated": bool(row.estimated), "priced": bool(row.priced)}  # stored as integers
    )
