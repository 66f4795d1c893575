"""A worker's default build id: the package version and a digest of what decides how its runs go,
so that two workers with the same build id run the same agents the same way (worker versioning
relies on it) and a changed prompt, tool or MCP server is a new build:

- Ratchet's own code (every module of the `ratchet` package, its workflows and activities);
- the agent profiles (prompt, tools, budgets, model: each profile as it is registered);
- the tools (name, description, argument schema, effect class, limits, and the source file of the
  function that runs each: plugins' tools included);
- the MCP servers this worker may reach (their definitions, secrets as `${NAME}` references).

Settings that only place the worker (addresses, paths, slots) are not part of it.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from importlib import metadata
from pathlib import Path

from ratchet.core.profiles import ProfileRegistry
from ratchet.core.tools import Tool, ToolRegistry
from ratchet.mcp.pool import McpPool

PACKAGE = "ratchet-agents"
CODE_PACKAGES = ("ratchet", "ratchet.workflows", "ratchet.activities", "ratchet.worker")


def package_version() -> str:
    try:
        return metadata.version(PACKAGE)
    except metadata.PackageNotFoundError:
        return "0"


def code_files() -> dict[str, Path]:
    """Every module of Ratchet's code packages, by a label that does not depend on how the package
    is installed (editable from a checkout or from a wheel): `ratchet.workflows:agent.py`."""
    import importlib

    found: dict[str, Path] = {}
    for name in CODE_PACKAGES:
        for root in map(Path, importlib.import_module(name).__path__):
            for path in root.rglob("*.py"):
                inner = path.relative_to(root)
                if "__pycache__" in inner.parts or any(inner.parts[0] == n.split(".")[-1] for n in CODE_PACKAGES[1:]):
                    continue  # a subpackage listed on its own (ratchet/workflows inside ratchet/, in a wheel)
                found[f"{name}:{inner.as_posix()}"] = path
    return found


def default_build_id(profiles: ProfileRegistry, tools: ToolRegistry, mcp: McpPool) -> str:
    digest = hashlib.sha256()
    for label, part in sorted(build_parts(profiles, tools, mcp).items()):
        digest.update(f"{label}\0{part}\n".encode())
    return f"{package_version()}-{digest.hexdigest()[:12]}"


def build_parts(profiles: ProfileRegistry, tools: ToolRegistry, mcp: McpPool) -> dict[str, str]:
    """What the build id digests, each part by its own digest (which part changed: compare two)."""
    files = code_files()
    known = {path.resolve() for path in files.values()}
    parts: dict[str, str] = {}

    def add(label: str, data: bytes) -> None:
        parts[label] = hashlib.sha256(data).hexdigest()

    for name, profile in profiles.profiles.items():
        add(f"profile:{name}", profile.model_dump_json().encode())
    for name, tool in tools.tools.items():
        add(f"tool:{name}", json.dumps(_tool_definition(tool), sort_keys=True, default=str).encode())
        source = inspect.getsourcefile(tool.fn)
        if source is not None and Path(source).resolve() not in known:  # a plugin's tool: its module
            files[f"{tool.fn.__module__}:{Path(source).name}"] = Path(source)
    for name, server in mcp.servers.items():
        add(f"mcp:{name}", server.model_dump_json().encode())
    for label, path in files.items():
        if path.exists():
            add(f"file:{label}", path.read_bytes())
    return parts


def _tool_definition(tool: Tool) -> dict:
    return {
        "description": tool.description,
        "schema": tool.args_model.model_json_schema(),
        "effect": str(tool.effect),
        "timeout_s": tool.timeout_s,
        "max_attempts": tool.max_attempts,
        "idempotent": tool.idempotent,
        "kind": tool.kind,
        "workspace": tool.workspace,
        "runs_code": tool.runs_code,
        "undo": tool.undo is not None,
        "reconcile": tool.reconcile is not None,
    }
