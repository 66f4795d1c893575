"""The approval policy check's cost per tool call (issue #41, item 4): `policy_check_us`, p50 and
p99 in microseconds, of what the workflow runs before a call that needs an approval asks anyone
(workflows/grants.py `automatic`: the profile's auto-approve rules, then the grants in force), on
a profile of 50 rules (globs, full-match regexes, bounds, equals over ten tools) and a run holding
five grants. Pure functions, timed in-process one call at a time; the calls mix ones a rule covers
early, late, through a grant, and ones nothing covers (every rule and grant looked at)."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

from bench.history import percentile
from bench.progress import Progress
from ratchet.contracts import STATE_VERSION, AgentRun, AgentState, Budget, Grant, ModelSettings, RunPlan, ToolPattern

TOOLS = [f"tool_{i}" for i in range(10)]
NOW = datetime(2026, 12, 1, tzinfo=UTC)


def rules(count: int = 50) -> list[ToolPattern]:
    """`count` rules, five kinds taking turns over the ten tools."""
    kinds = [
        lambda i: {"path": {"glob": f"area{i}/**/*.md"}},
        lambda i: {"argv": {"regex": f"pytest( -k test_{i})?( -q)?"}},
        lambda i: {"amount": {"lt": 10 * i + 1}},
        lambda i: {"to": {"equals": f"user{i}"}, "amount": {"le": 1000}},
        lambda i: {"path": {"glob": f"src/pkg{i}/*.py"}},
    ]
    return [ToolPattern(tool=TOOLS[i % 10], when=kinds[i % 5](i)) for i in range(count)]


def state_with_grants(count: int = 5) -> AgentState:
    state = AgentState(v=STATE_VERSION, workflow_id="bench-policy", run=AgentRun(agent="bench", objective="x"))
    for g in range(count):
        patterns = [
            ToolPattern(tool=TOOLS[(g + k) % 10], when={"path": {"glob": f"granted{g}/{k}/**"}}) for k in range(3)
        ]
        until = (NOW + timedelta(hours=1 if g % 2 else -1)).isoformat()  # half of them expired
        state.calls.grants.append(Grant(id=f"g{g + 1}", patterns=patterns, expires_at=until, by="bench",
                                        granted_at=NOW.isoformat(), source=f"call_{g}_0"))
    return state


def calls() -> list[tuple[str, dict[str, Any]]]:
    """Covered by the first rules, by the last ones, by a grant, and by nothing (escapes included)."""
    return [
        ("tool_0", {"path": "area0/a/b/readme.md"}),
        ("tool_1", {"argv": ["pytest", "-k", "test_1", "-q"]}),
        ("tool_9", {"path": "src/pkg49/mod.py"}),
        ("tool_8", {"to": "user48", "amount": 999}),
        ("tool_1", {"path": "granted1/0/deep/file.txt"}),
        ("tool_0", {"path": "area0/../secrets.md"}),
        ("tool_1", {"argv": ["pytest", "-k", "test_1;", "rm"]}),
        ("tool_2", {"amount": 10_000}),
        ("tool_7", {"path": "/etc/passwd", "content": "x" * 200}),
    ]


async def policy_cost(progress: Progress, rounds: int) -> dict[str, Any]:
    from workflows.grants import automatic

    plan = RunPlan(agent="bench", system_prompt="", model=ModelSettings(provider="scripted", model="script"), tools=[],
                   budget=Budget(), workspace="bench", call_ref="-", auto_approve=rules())
    state, mix = state_with_grants(), calls()
    progress.begin(f"policy: {rounds} rounds of {len(mix)} calls against {len(plan.auto_approve)} rules, 5 grants")
    for tool, args in mix:  # warm: the compile caches, outside the clock
        automatic(state, plan, tool, args, NOW)
    micros, approved = [], 0
    for _ in range(rounds):
        for tool, args in mix:
            began = time.perf_counter_ns()
            decision = automatic(state, plan, tool, args, NOW)
            micros.append((time.perf_counter_ns() - began) / 1000)
            approved += decision is not None
    p50, p99 = percentile(micros, 50), percentile(micros, 99)
    progress.end(f"p50 {p50:.1f} us, p99 {p99:.1f} us")
    return {"rules": len(plan.auto_approve), "grants": len(state.calls.grants), "calls": len(micros),
            "approved": approved, "p50_us": p50, "p99_us": p99}


def policy_figures(result: dict[str, Any]) -> dict[str, float]:
    return {"policy_check_us": result["p99_us"], "policy_check_p50_us": result["p50_us"]}
