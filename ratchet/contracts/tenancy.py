"""Tenants and priorities: who a run is for (`AgentRun.tenant`), how urgent it is
(`AgentRun.priority`, 1 most), and the rule that turns them into Temporal's task `Priority`
(priority key, fairness key, fairness weight), for the run's workflow tasks and every activity it
schedules. Data and pure functions only (the standard library): the client, the workflow and the
settings use the same rule.

The rule (docs/OPERATIONS.md, "Tenants and priorities"): a run's priority `p` (1-5, default 3) is a
band of two of the server's priority keys: the model path (`model.call`, `model.compact`,
`guardrail.judge`, and `run.prepare`, which a run's first model call waits for: milliseconds) runs
at key `2p - 1`, everything else (the workflow's tasks, tools, checkpoints, undo) at key `2p`.
Lower keys are dispatched first, so within a band model calls go before tools, and every key of a
more urgent run before those of a less urgent one. Priority comes before fairness: a quiet
tenant's tools wait behind a busy tenant's model calls of the same band. It needs
`matching.priorityLevels=10` on the server (`PRIORITY_LEVELS`); a server left at its default of 5
clips keys above 5 to 5. The tenant is the fairness key: backlogged tasks are dispatched across
tenants in proportion to their weights (`RATCHET_TENANT_WEIGHTS`, default 1)."""

from __future__ import annotations

from dataclasses import dataclass

MAX_TENANT_BYTES = 64
"""Temporal's limit on a fairness key."""
LOWEST_PRIORITY = 5
DEFAULT_PRIORITY = 3
PRIORITY_LEVELS = 2 * LOWEST_PRIORITY
"""The server's `matching.priorityLevels` the rule needs: two keys per run priority."""


def tenant_problem(tenant: str) -> str | None:
    """Why `tenant` cannot name a tenant, or None."""
    if not tenant.strip():
        return "must not be blank"
    size = len(tenant.encode("utf-8", "surrogatepass"))
    if size > MAX_TENANT_BYTES:
        return f"is {size} bytes; at most {MAX_TENANT_BYTES} (Temporal's limit on a fairness key)"
    if any(ch in tenant for ch in "\x00\"'\\") or not tenant.isprintable():
        return 'must be printable, without quotes or backslashes (it is queried as RatchetTenant="...")'
    return None


def priority_key(priority: int | None, model_path: bool) -> int:
    """The server's priority key for a task of a run of `priority` (None: the default): `2p - 1`
    on the model path, `2p` for anything else."""
    band = priority if priority is not None else DEFAULT_PRIORITY
    return 2 * band - 1 if model_path else 2 * band


@dataclass(frozen=True)
class TaskPriority:
    """What a run's tasks carry (the SDK's `Priority` is built from it on each side)."""

    priority_key: int
    fairness_key: str | None = None
    fairness_weight: float | None = None


def task_priority(tenant: str | None, priority: int | None, weight: float | None, model_path: bool) -> TaskPriority:
    """A run's task priority: the tenant's weight only with a tenant (None: Temporal's default, 1)."""
    return TaskPriority(priority_key(priority, model_path), tenant, weight if tenant is not None else None)


def parse_tenant_map(text: str, what: str, number: type[int] | type[float]) -> dict[str, float]:
    """`"acme:3,beta:1"` as {tenant: value}; every value above 0 (ValueError naming the tenant)."""
    values: dict[str, float] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        tenant, sep, raw = item.rpartition(":")
        tenant = tenant.strip()
        if not sep or not tenant:
            raise ValueError(f"{item!r} is not TENANT:{what.upper()}")
        problem = tenant_problem(tenant)
        if problem:
            raise ValueError(f"tenant {tenant!r} {problem}")
        try:
            value = number(raw.strip())
        except ValueError:
            raise ValueError(f"tenant {tenant!r}: {what} {raw.strip()!r} is not a number") from None
        if not value > 0 or value != value or value == float("inf"):
            raise ValueError(f"tenant {tenant!r}: {what} {raw.strip()} must be above 0")
        values[tenant] = value
    return values
