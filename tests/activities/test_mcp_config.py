"""MCP configuration without a server: the servers file, the names the model sees, effects from
annotations and profile overrides, compensating calls, and the secrets a configuration names."""

from __future__ import annotations

import json

import pytest

from ratchet.activities.mcp import McpActivities
from ratchet.contracts import ArtifactRef, EffectClass
from ratchet.core.profiles import ProfileRegistry
from ratchet.mcp.catalog import McpTool, check_names, pin
from ratchet.mcp.config import TOOL_NAME, Compensation, McpConfigError, McpServer, McpToolset, load_servers, public_name
from ratchet.mcp.pool import McpPool
from ratchet.mcp.results import undo_of
from ratchet.ops.secrets import child_environment, secret_values
from ratchet.ops.settings import Settings, SettingsError
from ratchet.plugin import mcp_pool
from ratchet.stores.artifacts import DirectoryArtifactStore, get_json
from ratchet.stores.ledger import SqliteLedger


def test_servers_file_in_json_and_toml(tmp_path):
    (tmp_path / "s.json").write_text(json.dumps({"servers": {
        "tracker": {"command": "python", "args": ["t.py"], "env": {"TOKEN": "${TRACKER_TOKEN}"}, "timeout_s": 5},
        "docs": {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer ${DOCS_TOKEN}"}},
    }}))
    (tmp_path / "s.toml").write_text('[servers.tracker]\ncommand = "python"\nargs = ["t.py"]\nlocal = true\n')
    tracker, docs = load_servers(tmp_path / "s.json")
    assert (tracker.name, tracker.transport, tracker.timeout_s, docs.transport) == ("tracker", "stdio", 5, "http")
    assert tracker.secret_variables() == ["TRACKER_TOKEN"] and docs.secret_variables() == ["DOCS_TOKEN"]
    assert docs.resolved_headers({"DOCS_TOKEN": "s3cret"}) == {"Authorization": "Bearer s3cret"}
    assert load_servers(tmp_path / "s.toml")[0].local


@pytest.mark.parametrize("servers, says", [
    ({"x": {"command": "a", "url": "http://h/mcp"}}, "server 'x': give either `command`"),
    ({"x": {}}, "server 'x': give either `command`"),
    ({"x": {"url": "ftp://h"}}, "server 'x': url must start with http"),
    ({"x y": {"command": "a"}}, "server 'x y': name: String should match"),
    ({"x": {"command": "a", "timeout": 3}}, "server 'x': timeout: Extra inputs are not permitted"),
    ({"x": "python"}, "server 'x' must be a table"),
])
def test_a_bad_server_is_refused_naming_it(tmp_path, servers, says):
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"servers": servers}))
    with pytest.raises(McpConfigError, match=str(path)) as err:
        load_servers(path)
    assert says in str(err.value)


def test_a_missing_file_or_variable_is_a_clear_error(tmp_path):
    with pytest.raises(SettingsError, match="RATCHET_MCP_SERVERS: cannot read"):
        mcp_pool(Settings(mcp_servers=tmp_path / "absent.json"))
    server = McpServer(name="docs", url="http://h/mcp", headers={"X-Key": "${NOT_SET_ANYWHERE}"})
    with pytest.raises(McpConfigError, match=r"MCP server 'docs': header X-Key names \$\{NOT_SET_ANYWHERE\}"):
        server.resolved_headers({})


def test_public_names_are_valid_function_names_and_a_pure_function_of_the_pair():
    assert public_name("tracker", "create_issue") == "tracker__create_issue"
    odd = [("tracker", "issues.create"), ("t", "x" * 80), ("t", "日本語"), ("t", "a b/c")]
    names = [public_name(s, t) for s, t in odd]
    assert all(TOOL_NAME.match(n) for n in names), names
    assert names == [public_name(s, t) for s, t in odd] and len(set(names)) == len(names)
    assert public_name("t", "a.b") != public_name("t", "a_b")


LISTED = [
    {"name": "search", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}},
    {"name": "create", "inputSchema": {"type": "object"}},
    {"name": "close", "inputSchema": {"type": "object"}, "annotations": {"idempotentHint": True, "destructiveHint": False}},
    {"name": "wipe", "inputSchema": {"type": "object"}, "annotations": {"destructiveHint": True}},
    {"name": "weird", "inputSchema": "not a schema"},
    {"name": "search"},
]


def test_effects_come_from_annotations_and_the_profile_overrides_them():
    toolset = McpToolset(
        server="t", effects={"wipe": "read_only"}, idempotent=["create"],
        compensations={"create": Compensation(tool="close", arguments={"id": "$result.id"})},
    )
    tools = {t.tool: t for t in pin(toolset, LISTED)}
    assert list(tools) == ["search", "create", "close", "wipe", "weird"], "a duplicate is left out"
    assert tools["search"].effect == EffectClass.READ_ONLY
    assert tools["create"].effect == EffectClass.COMPENSABLE and tools["create"].idempotent
    assert tools["close"].effect == EffectClass.IRREVERSIBLE and tools["close"].idempotent, "no readOnlyHint: irreversible"
    assert tools["wipe"].effect == EffectClass.READ_ONLY, "the profile's word wins"
    assert tools["weird"].input_schema == {"type": "object"}
    spec = tools["create"].spec(McpServer(name="t", command="x", timeout_s=7))
    assert (spec.mcp, spec.activity_type, spec.has_undo, spec.timeout_s) == ("t", "mcp.t", True, 7)


def test_a_profile_naming_tools_the_server_lacks_is_refused():
    with pytest.raises(McpConfigError, match="MCP server 't' does not list nope, undo_it"):
        pin(McpToolset(server="t", tools=["search", "nope"], compensations={"create": Compensation(tool="undo_it")}), LISTED)
    with pytest.raises(ValueError, match="compensable but has no compensations entry"):
        McpToolset(server="t", effects={"create": "compensable"})
    with pytest.raises(McpConfigError, match="taken twice"):
        check_names(pin(McpToolset(server="t", tools=["search"]), LISTED), {"t__search"})


def test_a_compensating_call_takes_its_arguments_from_the_call_and_its_result():
    tool = McpTool(name="t__create", server="t", tool="create", compensation=Compensation(
        tool="close", arguments={"id": "$result.issue.id", "project": "$arguments.project", "reason": "rolled back"},
    ))
    undo = undo_of(tool, {"project": "ops"}, {"issue": {"id": 12}})
    assert undo["arguments"] == {"id": 12, "project": "ops", "reason": "rolled back"}
    assert (undo["server"], undo["tool"]) == ("t", "close") and "close(id=12" in undo["description"]
    missing = undo_of(tool, {"project": "ops"}, None)
    assert "no structured result" in missing["problem"] and missing["description"].startswith("cannot undo")
    assert not Compensation(tool="close", arguments={"id": "$arguments.id"}).needs_result()


def test_variables_a_server_names_are_secrets(tmp_path, monkeypatch):
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"servers": {"t": {"command": "x", "env": {"A": "${MCP_UNIT_TOKEN}"}}}}))
    monkeypatch.setenv("MCP_UNIT_TOKEN", "tok-" + "z" * 20)
    settings = Settings(mcp_servers=path)
    assert "tok-" + "z" * 20 in secret_values(settings)
    assert "MCP_UNIT_TOKEN" not in child_environment(), "a program the agent runs must not read it"


def test_read_only_tools_of_a_local_server_may_run_as_local_activities(tmp_path):
    servers = [McpServer(name="near", command="x", local=True, timeout_s=10), McpServer(name="far", command="x", timeout_s=10)]
    artifacts = DirectoryArtifactStore(tmp_path / "a")
    mcp = McpActivities(McpPool(servers), ProfileRegistry(), artifacts, SqliteLedger(tmp_path / "l.sqlite3"))
    tools = pin(McpToolset(server="near"), LISTED[:2]) + pin(McpToolset(server="far"), LISTED[:1])
    pinned = mcp.pinned(tools, local_ok=True, taken=set())
    assert [(s.name, s.local) for s in pinned.specs] == [("near__search", True), ("near__create", False), ("far__search", False)]
    assert not any(s.local for s in mcp.pinned(tools, local_ok=False, taken=set()).specs), "not without a workflow cache"
    assert [t.name for t in pinned.schemas] == ["near__search", "near__create", "far__search"]
    catalog = get_json(artifacts, ArtifactRef.json(pinned.ref))
    assert [t["name"] for t in catalog["tools"]] == ["near__search", "near__create", "far__search"]
