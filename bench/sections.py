"""The bench's sections, in order: what each measures, with which sizes, under which results key.

`run_sections` runs the chosen ones one after another. A section that raises is recorded as
failed with its traceback and the next one runs; after every section, failed or not, `done` is
called with its record, so the caller writes the results file as each one finishes and a crash in
the 117th measurement loses nothing of the 116 before it.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import console, longrun, mcp_calls, micro, profiling, providers, quiet, sandbox, scale, scaleout, sessions, steps
from bench import approvals, billing, fairness, guard, hooks, policy, shadow, streaming
from bench.harness import Env
from bench.progress import Progress


@dataclass
class Context:
    progress: Progress
    cfg: dict[str, Any]
    work: Path
    keep: Path
    """The results directory: what a section keeps beside latest.json (py-spy's stacks)."""
    env: Env | None = None
    probe_s: float = 1.0
    """Seconds of other programs' CPU measured, the bench idle, before each section."""


@dataclass(frozen=True)
class Section:
    name: str
    measure: Callable[[Context], Awaitable[Any]]
    units: Callable[[dict[str, Any]], int]
    key: str = ""
    """The results key (default: the name)."""
    meta: tuple[str, ...] = ()
    """Config keys the report reads from the results' meta, set when this section ran."""
    server: bool = True
    """False: runs in-process, without the dev server."""

    @property
    def results_key(self) -> str:
        return self.key or self.name


def _env(ctx: Context) -> Env:
    assert ctx.env is not None, "a section that needs the dev server ran without one"
    return ctx.env


def _c(ctx: Context, key: str) -> Any:
    return ctx.cfg[key]


async def _micro(ctx: Context) -> Any:
    ctx.progress.begin("micro: model.call in-process by transcript length")
    rows = await micro.model_call_costs(*_c(ctx, "micro"))
    ctx.progress.end("done")
    return rows


async def _providers(ctx: Context) -> Any:
    ctx.progress.begin("providers: anthropic against openai, caching on against off")
    costs = await providers.provider_costs(*_c(ctx, "providers"))
    ctx.progress.end("done")
    return costs


async def _policy(ctx: Context) -> Any:
    return await policy.policy_cost(ctx.progress, _c(ctx, "policy"))


SECTIONS: tuple[Section, ...] = (
    Section("steps", lambda c: steps.step_cost(_env(c), c.progress, _c(c, "variants"), _c(c, "steps"), _c(c, "reps"),
                                               _c(c, "warm_runs")),
            lambda cfg: len(cfg["variants"]) * len(cfg["steps"]) * cfg["reps"], key="step_cost", meta=("variants",)),
    Section("components", lambda c: steps.step_cost(
        _env(c), c.progress, _c(c, "component_variants"), [_c(c, "component_steps")], _c(c, "component_reps"),
        _c(c, "warm_runs"), section="components"),
            lambda cfg: len(cfg["component_variants"]) * cfg["component_reps"], meta=("component_steps",)),
    Section("scaleout", lambda c: scaleout.scaleout(_env(c), c.progress, _c(c, "scaleout_steps"), _c(c, "scaleout_reps"),
                                                    _c(c, "warm_runs"), _c(c, "scaleout_concurrent")),
            lambda cfg: 2 * (len(scaleout.WORKLOADS) + 1) * cfg["scaleout_reps"]),
    Section("sandbox", lambda c: sandbox.sandbox_cost(_env(c), c.progress, *_c(c, "sandbox")),
            lambda cfg: cfg["sandbox"][1]),
    Section("mcp", lambda c: mcp_calls.mcp_cost(_env(c), c.progress, *_c(c, "mcp")), lambda cfg: cfg["mcp"][1] + 1),
    Section("stream", lambda c: streaming.stream_cost(_env(c), c.progress, *_c(c, "stream")),
            lambda cfg: 2 * cfg["stream"][1] + 1),
    Section("sessions", lambda c: sessions.session_cost(_env(c), c.progress, *_c(c, "sessions")), lambda cfg: 3),
    Section("console", lambda c: console.console_cost(_env(c), c.progress, *_c(c, "console")), lambda cfg: 4),
    Section("hooks", lambda c: hooks.hooks_cost(_env(c), c.progress, _c(c, "hooks")), lambda cfg: 1),
    Section("approvals", lambda c: approvals.approval_cost(_env(c), c.progress, _c(c, "approvals")), lambda cfg: 1),
    Section("shadow", lambda c: shadow.shadow_cost(_env(c), c.progress, *_c(c, "shadow")), lambda cfg: cfg["shadow"][1] + 2),
    Section("billing", lambda c: billing.billing_cost(_env(c), c.progress, *_c(c, "billing")), lambda cfg: 2 * cfg["billing"][1] + 2),
    Section("guard", lambda c: guard.guard_cost(_env(c), c.progress, *_c(c, "guard")), lambda cfg: 1),
    Section("fairness", lambda c: fairness.fairness_cost(_env(c), c.progress, *_c(c, "fairness")), lambda cfg: 2),
    Section("throughput", lambda c: scale.throughput_pair(_env(c), c.progress, _c(c, "throughput")),
            lambda cfg: sum(len(scale.THROUGHPUT_VARIANTS) * reps + scale.side_by_side_reps(reps)
                            for _, _, reps in cfg["throughput"])),
    Section("sweep", lambda c: scale.sweep(_env(c), c.progress, _c(c, "levels"), _c(c, "level_steps"),
                                           _c(c, "headline_agents"), _c(c, "headline_steps")),
            lambda cfg: len(cfg["levels"]), meta=("headline_agents",)),
    Section("cached", lambda c: scale.cached_runs(_env(c), c.progress, _c(c, "cached")), lambda cfg: 1),
    Section("long", lambda c: longrun.long_and_replay(_env(c), c.progress, _c(c, "long_steps"), _c(c, "replay_steps"),
                                                      _c(c, "long_budget_s")), lambda cfg: 3),
    Section("profile", lambda c: profiling.profile(_env(c), c.progress, *_c(c, "profile"), c.work, c.keep / "profiles"),
            lambda cfg: 2 * (1 + len(cfg["profile"][2]))),
    Section("micro", _micro, lambda cfg: 1, server=False),
    Section("providers", _providers, lambda cfg: 1, server=False),
    Section("policy", _policy, lambda cfg: 1, server=False),
)
BY_NAME = {s.name: s for s in SECTIONS}
NAMES = tuple(BY_NAME)


@dataclass
class Record:
    """What one section did: its result or its failure, and how busy the machine was meanwhile."""

    section: Section
    result: Any = None
    failure: str = ""
    duration_s: float = 0.0
    before: dict[str, Any] = field(default_factory=dict)
    during: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.failure


async def run_one(ctx: Context, section: Section) -> Record:
    record = Record(section, before=quiet.probe(ctx.probe_s) if ctx.probe_s > 0 else {})
    first, began = quiet.read(), time.monotonic()
    try:
        record.result = await section.measure(ctx)
    except Exception:  # noqa: BLE001 - every failure is recorded; the next section still runs
        record.failure = traceback.format_exc()
        ctx.progress.note(f"{section.name} FAILED: {record.failure.strip().splitlines()[-1]}")
    record.duration_s = time.monotonic() - began
    record.during = quiet.between(first, quiet.read())
    return record


async def run_sections(ctx: Context, sections: Iterable[Section], done: Callable[[Record], None]) -> list[Record]:
    records = []
    for section in sections:
        records.append(await run_one(ctx, section))
        done(records[-1])
    return records
