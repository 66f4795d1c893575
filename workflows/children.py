"""Sub-agents: the child run's input, its budget share, and how a parent undoes it (pure)."""

from __future__ import annotations

from typing import Any

from ratchet.contracts import AgentResult, AgentState, BudgetUsed, RunPlan


def child_id(key: str) -> str:
    """Derived from the delegate call's idempotency key: stable across retries and replays."""
    return f"{key}/child"


def child_run(state: AgentState, plan: RunPlan, args: dict[str, Any]) -> tuple[dict, str | None]:
    agent, objective = args.get("agent"), args.get("objective")
    if not isinstance(agent, str) or not isinstance(objective, str) or not objective.strip():
        return {}, "delegate needs 'agent' (a profile name) and 'objective' (text)"
    budget = plan.budget
    used = state.used
    steps_left = budget.max_steps - used.steps
    if isinstance(args.get("max_steps"), int):
        steps_left = min(steps_left, args["max_steps"])
    tokens_left = budget.max_tokens - used.prompt_tokens - used.completion_tokens
    if steps_left < 1 or tokens_left < 1:
        return {}, "no budget left for a sub-agent"
    child_budget: dict[str, Any] = {"max_steps": steps_left, "max_tokens": tokens_left}
    if budget.max_cost_usd is not None:
        child_budget["max_cost_usd"] = max(budget.max_cost_usd - used.cost_usd, 0.0)
    # A delegate call is atomic for the parent: a child that fails or is cancelled undoes all of
    # its own effects (rollback_all), and a finished child's effects are undone by the parent.
    run: dict[str, Any] = {
        "agent": agent,
        "objective": objective,
        "workspace": plan.workspace,
        "budget": child_budget,
        "on_failure": "rollback_all",
    }
    if isinstance(args.get("model"), dict):
        run["model"] = args["model"]
    if state.run.tenant is not None:  # the parent's tenant and priority (ratchet/contracts/tenancy.py)
        run["tenant"] = state.run.tenant
    if state.run.priority is not None:
        run["priority"] = state.run.priority
    if state.workspace.host is not None:  # the same directory: the host holding the parent's workspace
        run["workspace_host"] = state.workspace.host
    return run, None


def charge(used: BudgetUsed, child: BudgetUsed) -> None:
    """The tokens, cost and steps a child spent count against the parent's budget."""
    used.steps += child.steps
    used.prompt_tokens += child.prompt_tokens
    used.completion_tokens += child.completion_tokens
    used.cache_read_tokens += child.cache_read_tokens
    used.cache_write_tokens += child.cache_write_tokens
    used.cost_usd += child.cost_usd
    used.cost_unknown = used.cost_unknown or child.cost_unknown
    used.model_calls += child.model_calls
    used.tool_calls += child.tool_calls


def undo_info(child: AgentResult) -> dict[str, Any]:
    return {
        "child_id": child.workflow_id,
        "workspace": child.workspace,
        "workspace_host": child.workspace_host,
        "effects": [e.model_dump(mode="json") for e in child.effects],
    }


def summary(child: AgentResult) -> str:
    text = f"sub-agent {child.workflow_id} ended {child.phase} after {child.steps} steps"
    if child.answer:
        text += f": {child.answer}"
    if child.last_error and child.phase != "DONE":
        text += f" ({child.last_error})"
    return text
