"""The import contract, checked by machine (ast, every import in every module, function-level ones
included): the rules of the layer picture in ratchet/__init__.py. No arrow runs back up: core imports
only contracts, and a new upward arrow fails here."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = {"ratchet": ROOT / "ratchet", "ratchet.workflows": ROOT / "workflows",
            "ratchet.activities": ROOT / "activities", "ratchet.worker": ROOT / "worker"}
SURFACES = {"ratchet.cli", "ratchet.client", "ratchet.replay", "ratchet.worker", "ratchet.serve", "ratchet.console"}
"""What people and programs use; nothing beneath them imports them."""
RULES = {
    "ratchet.contracts": set(),
    "ratchet.core": {"ratchet.contracts"},
    "ratchet.mcp": {"ratchet.contracts", "ratchet.core"},
    "ratchet.ops": {"ratchet.contracts", "ratchet.core", "ratchet.mcp"},
    "ratchet.workflows": {"ratchet.contracts", "ratchet.core"},
    "ratchet.stores": {"ratchet.contracts", "ratchet.core", "ratchet.ops"},
    "ratchet.people": {"ratchet.contracts", "ratchet.core", "ratchet.ops", "ratchet.stores"},
}
"""Layer -> the only other layers it may import (contracts: pydantic and the standard library;
core: the tool and profile API over contracts, what settings and stores it needs typed by its own
protocols; mcp: the MCP servers' protocol, beneath ops; ops: settings and the worker's plumbing,
beneath stores and payloads; workflows: deterministic code, no I/O layer; people: who a request to
the console or `ratchet serve` comes from, over the users table of stores)."""
WORKER_SIDE = {"ratchet.activities", "ratchet.workflows", "ratchet.plugin"}
"""What runs in a worker: the client (and so every surface over it) connects and reads without it."""


def layer(module: str) -> str:
    return ".".join(module.split(".")[:2])


def imports() -> dict[tuple[str, str], list[str]]:
    """(importing layer, imported layer) -> where."""
    found: dict[tuple[str, str], list[str]] = {}
    for package, root in PACKAGES.items():
        for path in root.rglob("*.py"):
            parts = [p for p in path.relative_to(root).with_suffix("").parts if p != "__init__"]
            here = layer(".".join([package, *parts]))
            for node in ast.walk(ast.parse(path.read_text())):
                names = [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else (
                    [a.name for a in node.names] if isinstance(node, ast.Import) else [])
                for name in names:
                    if name.startswith("ratchet.") and layer(name) != here:
                        found.setdefault((here, layer(name)), []).append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_each_layer_imports_only_what_the_picture_allows():
    broken = [f"{src} -> {dst} ({', '.join(where[:3])})" for (src, dst), where in imports().items()
              if src in RULES and dst not in RULES[src]]
    assert not broken, "\n".join(broken)


def test_nothing_beneath_the_surfaces_imports_them():
    broken = [f"{src} -> {dst} ({', '.join(where[:3])})" for (src, dst), where in imports().items()
              if dst in SURFACES and src not in SURFACES and src != "ratchet"]
    assert not broken, "\n".join(broken)


def test_the_client_imports_nothing_of_the_worker_side():
    broken = [f"{src} -> {dst} ({', '.join(where[:3])})" for (src, dst), where in imports().items()
              if src == "ratchet.client" and dst in WORKER_SIDE]
    assert not broken, "\n".join(broken)


def test_only_the_client_package_face_imports_its_facade():
    """ratchet/client/runs.py (RatchetClient, RunHandle) uses the client's other modules, which get
    what they need passed in (`RunCalls`): none imports it back (the circle runs <-> stream <-> shared_stream)."""
    back = [f"{path.relative_to(ROOT)}:{node.lineno}" for path in (ROOT / "ratchet" / "client").glob("*.py")
            if path.name not in ("runs.py", "__init__.py") for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.ImportFrom) and node.module in ("ratchet.client.runs", "ratchet.client")
            and (node.module == "ratchet.client.runs" or any(a.name == "runs" for a in node.names))]
    assert not back, "\n".join(back)


def test_the_remapped_packages_import_their_own_modules_relatively():
    """workflows/, activities/ and worker/ install as ratchet.workflows, ratchet.activities and
    ratchet.worker (pyproject's package-dir): an absolute import of their own modules names a path
    that static tools cannot resolve in the source tree, so their own imports are relative."""
    absolute = []
    for package in ("ratchet.workflows", "ratchet.activities", "ratchet.worker"):
        for path in PACKAGES[package].rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                names = [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else (
                    [a.name for a in node.names] if isinstance(node, ast.Import) else [])
                absolute += [f"{path.relative_to(ROOT)}:{node.lineno}: {n}" for n in names
                             if n == package or n.startswith(package + ".")]
    assert not absolute, "use `from . import ...` inside the package:\n" + "\n".join(absolute)
