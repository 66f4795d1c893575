"""The tenants' settings (part of `Settings`): each tenant's fairness weight, its limit on open runs,
its cost cap per day, and what a start over the limit does (docs/OPERATIONS.md, "Tenants and priorities"). Every worker
and client of a task queue should say the same: the client gives a run's workflow tasks its
tenant's weight, the worker its activities."""

from __future__ import annotations

from typing import Literal

from pydantic import AliasChoices, Field, field_validator
from pydantic_settings import BaseSettings

from ratchet.contracts import parse_tenant_map


class TenantSettings(BaseSettings):
    tenant_weights: str = Field(
        "",
        validation_alias=AliasChoices("RATCHET_TENANT_WEIGHTS"),
        description='Fairness weight per tenant, "acme:3,beta:1" (others: 1): a backlog is served across tenants '
        "in proportion to their weights; each weight above 0.",
    )
    tenant_max_open: str = Field(
        "",
        validation_alias=AliasChoices("RATCHET_TENANT_MAX_OPEN"),
        description='Open (running) runs each tenant may have, "acme:100,beta:10" (others: no limit), checked '
        "at start from visibility (ratchet/client/tenants.py).",
    )
    tenant_daily_usd: str = Field(
        "",
        validation_alias=AliasChoices("RATCHET_TENANT_DAILY_USD"),
        description='Cost cap per tenant and UTC day, "acme:50" (others: none), in USD billed across all its '
        "runs (the billing ledger's running total): a start over it is refused, a model call that would "
        "cross it is not made and its run ends BUDGET_EXHAUSTED naming the cap.",
    )
    tenant_over_limit: Literal["refuse", "queue"] = Field(
        "refuse",
        validation_alias=AliasChoices("RATCHET_TENANT_OVER_LIMIT"),
        description="A start over its tenant's limit: `refuse` (TenantLimitReached), or `queue`: the start waits "
        "for a slot, up to RATCHET_TENANT_QUEUE_TIMEOUT_S, then is refused.",
    )
    tenant_queue_timeout_s: float = Field(
        600.0, gt=0, le=24 * 3600, validation_alias=AliasChoices("RATCHET_TENANT_QUEUE_TIMEOUT_S")
    )

    @field_validator("tenant_weights")
    @classmethod
    def _weights(cls, value: str) -> str:
        parse_tenant_map(value, "weight", float)
        return value

    @field_validator("tenant_max_open")
    @classmethod
    def _limits(cls, value: str) -> str:
        parse_tenant_map(value, "limit", int)
        return value

    @field_validator("tenant_daily_usd")
    @classmethod
    def _caps(cls, value: str) -> str:
        parse_tenant_map(value, "daily cap", float)
        return value

    @field_validator("tenant_over_limit", mode="before")
    @classmethod
    def _lower_mode(cls, value: object) -> object:
        return value.lower() if isinstance(value, str) else value

    def tenant_weight(self, tenant: str | None) -> float | None:
        """`tenant`'s weight, None for no tenant or none configured (Temporal's default, 1)."""
        return parse_tenant_map(self.tenant_weights, "weight", float).get(tenant) if tenant is not None else None

    def tenant_limit(self, tenant: str | None) -> int | None:
        """`tenant`'s limit on open runs, None for none."""
        if tenant is None:
            return None
        limit = parse_tenant_map(self.tenant_max_open, "limit", int).get(tenant)
        return int(limit) if limit is not None else None

    def tenant_daily_cap(self, tenant: str | None) -> float | None:
        """`tenant`'s cost cap per UTC day in USD, None for none."""
        return parse_tenant_map(self.tenant_daily_usd, "daily cap", float).get(tenant) if tenant is not None else None
