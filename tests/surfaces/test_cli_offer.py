"""`ratchet profiles` and `ratchet tools`: what a worker with this environment offers, read as the
worker reads it (the built-ins plus RATCHET_PLUGINS and RATCHET_MCP_SERVERS)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.e2e  # processes as a user runs them: `make test-e2e`, not `make test`

def ratchet(*args: str, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("RATCHET_")}
    return subprocess.run([sys.executable, "-m", "ratchet.cli.main", *args], env={**clean, **env},
                          capture_output=True, text=True, timeout=60)


def test_profiles_show_tools_approvals_and_verifier_of_the_shipped_and_plugin_profiles():
    done = ratchet("profiles", "--json", RATCHET_PLUGINS="tests.plugins.probe")
    assert done.returncode == 0, done.stderr
    profiles = {p["name"]: p for p in json.loads(done.stdout)}
    assert profiles["ops"]["approval"] == ["create_ticket when title ~ /^prod/"]
    assert profiles["coder"]["verifier"] == "python -m unittest" and profiles["coder"]["approval"] == []
    assert "probe" in profiles, "a RATCHET_PLUGINS module's profile"
    text = ratchet("profiles").stdout
    assert "ops: tools create_ticket, wait" in text and "waits for approval: create_ticket when title ~ /^prod/" in text


def test_tools_show_effect_classes_undo_and_reconcile_and_mcp_servers(tmp_path):
    servers = tmp_path / "servers.json"
    servers.write_text(json.dumps({"servers": {"docs": {"command": "true"}}}))
    done = ratchet("tools", "--json", RATCHET_MCP_SERVERS=str(servers))
    assert done.returncode == 0, done.stderr
    offer = json.loads(done.stdout)
    tools = {t["name"]: t for t in offer["tools"]}
    assert tools["create_ticket"] | {} == {**tools["create_ticket"], "effect": "compensable", "undo": True, "reconcile": True}
    assert tools["run_command"]["effect"] == "irreversible" and tools["read_file"]["workspace"]
    assert offer["mcp_servers"] == [{"server": "docs", "transport": "stdio", "local": False, "max_attempts": 5}]
    bad = ratchet("tools", RATCHET_PLUGINS="no.such.module")
    assert bad.returncode == 2 and "RATCHET_PLUGINS" in bad.stderr and "Traceback" not in bad.stderr


def test_the_readmes_tool_example_is_one_a_worker_accepts(tmp_path):
    """The README's "Your own tools and profiles" block, as a plugin module: it imports from the
    public `ratchet` API, and `ratchet tools` lists its tool with its undo (a worker would start)."""
    readme = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "README.md")
    text = open(readme).read()
    block = text.split("## Your own tools and profiles", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    (tmp_path / "readme_tools.py").write_text(block)
    done = ratchet("tools", "--json", RATCHET_PLUGINS="readme_tools", PYTHONPATH=str(tmp_path))
    assert done.returncode == 0, done.stderr
    tools = {t["name"]: t for t in json.loads(done.stdout)["tools"]}
    assert tools["open_ticket"]["effect"] == "compensable" and tools["open_ticket"]["undo"]
    check = subprocess.run([sys.executable, "-c", "import readme_tools; from ratchet.core.tools import default_registry; "
                            "print(default_registry.problems())"], env={**os.environ, "PYTHONPATH": str(tmp_path)},
                           capture_output=True, text=True, timeout=60)
    assert check.stdout.strip() == "[]", check.stdout + check.stderr


BAD_RULES = """
from ratchet.core.profiles import AgentProfile, register_profile
register_profile(AgentProfile(name="bad", system_prompt="s", tools=["write_file"], auto_approve=[
    {"tool": "write_file", "when": {"path": {"glob": "docs/**"}}},
    {"tool": "write_file", "when": {"path": {"regex": "docs/(.*"}}},
]))
"""


def test_an_approval_rule_that_does_not_parse_stops_the_worker_naming_the_rule(tmp_path):
    (tmp_path / "bad_rules.py").write_text(BAD_RULES)
    env = {"RATCHET_PLUGINS": "bad_rules", "PYTHONPATH": str(tmp_path), "TEMPORAL_ADDRESS": "127.0.0.1:1"}
    for verb in ("worker", "profiles"):
        done = ratchet(verb, **env)
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert "'bad_rules' declares an invalid AgentProfile: auto_approve.1.when.path.regex" in done.stderr
        assert "regex 'docs/(.*' does not compile" in done.stderr
    policy = ratchet("profiles", "--json", RATCHET_PLUGINS="tests.plugins.policy")
    [shown] = [p for p in json.loads(policy.stdout) if p["name"] == "policy"]
    assert shown["auto_approve"] == ["write_file path=docs/**", "probe_pay amount=<100"]
