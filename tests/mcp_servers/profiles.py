"""The agent profiles of the MCP tests (tests/activities/test_mcp_runs.py, tests/activities/test_mcp_crash.py): imported by
the tests, and by worker processes through RATCHET_PLUGINS. The servers they name are configured by
each test (`tracker`, `tracker_http`, `hostile`, `broken`, `wrong_url`)."""

from __future__ import annotations

from ratchet.contracts import ApprovalRule, Budget, Verifier
from ratchet.core.profiles import AgentProfile, register_profile
from ratchet.mcp.config import Compensation, McpToolset

register_profile(AgentProfile(
    name="mcp_saga", system_prompt="You track issues.", tools=["probe_wait"], budget=Budget(max_steps=20),
    mcp=[McpToolset(server="tracker", tools=["search_issues", "create_issue"],
                    compensations={"create_issue": Compensation(tool="close_issue", arguments={"id": "$result.id"})})],
    verifier=Verifier(argv=["true"]),
))
register_profile(AgentProfile(
    name="mcp_http", system_prompt="You send email.", tools=[],
    mcp=[McpToolset(server="tracker_http", tools=["whoami", "send_email"])],
))
register_profile(AgentProfile(
    name="mcp_hostile", system_prompt="You brave a hostile server.", tools=[],
    budget=Budget(max_tokens=10**9),  # the model is sent the whole 20 MB (activities/model.py reads offloaded outputs)
    mcp=[McpToolset(server="hostile", idempotent=["crash_once"])],
    allow_irreversible=["hostile__crash_once"], approval_rules=[ApprovalRule(tool="hostile__old_tool")],
))
register_profile(AgentProfile(
    name="mcp_strict", system_prompt="Your server crashes.", tools=[],
    mcp=[McpToolset(server="hostile", tools=["crash_once"])], allow_irreversible=["hostile__crash_once"],
))
register_profile(AgentProfile(
    name="mcp_many", system_prompt="You have many tools.", tools=[], mcp=[McpToolset(server="hostile")],
))
register_profile(AgentProfile(
    name="mcp_broken", system_prompt="Your server is misconfigured.", tools=[], mcp=[McpToolset(server="broken")],
))
register_profile(AgentProfile(
    name="mcp_wrong_url", system_prompt="Your server's url is wrong.", tools=[], mcp=[McpToolset(server="wrong_url")],
))
register_profile(AgentProfile(
    name="mcp_durable", system_prompt="You open issues.", tools=[],
    mcp=[McpToolset(server="tracker", tools=["create_issue"], idempotent=["create_issue"])],  # it dedupes on the key
    allow_irreversible=["tracker__create_issue"],
))
