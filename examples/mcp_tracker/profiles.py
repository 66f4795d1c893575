"""The `triage` agent: tools from the tracker MCP server (servers.json), `create_issue` undone by
`close_issue`. Load with RATCHET_PLUGINS=examples.mcp_tracker.profiles (README, "Tools from MCP servers")."""

from ratchet.core.profiles import AgentProfile, register_profile
from ratchet.mcp.config import Compensation, McpToolset

register_profile(AgentProfile(
    name="triage", system_prompt="You triage issues.", tools=[],
    mcp=[McpToolset(server="tracker", tools=["search_issues", "create_issue", "send_email"],
                    compensations={"create_issue": Compensation(tool="close_issue", arguments={"id": "$result.id"})})],
))
