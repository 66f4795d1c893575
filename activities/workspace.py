"""Confining file tools to a run's workspace directory."""

from __future__ import annotations

import re
from pathlib import Path

from ratchet.core.tools import ToolError

_WORKSPACE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")


def open_workspace(root: Path, name: str) -> Path:
    """The directory `root/name`, created if missing; a name that could escape is refused."""
    if not _WORKSPACE_NAME.match(name) or name in (".", ".."):
        raise ToolError(f"workspace name {name!r} is not allowed (letters, digits, _ . - only)")
    root = root.resolve()
    workspace = root / name
    workspace.mkdir(parents=True, exist_ok=True)
    resolved = workspace.resolve()
    if resolved.parent != root:
        raise ToolError(f"workspace {name!r} resolves outside the workspace root")
    return resolved


def confine(workspace: Path, relative: str) -> Path:
    """Resolve `relative` inside `workspace`, following symlinks; refuse anything that escapes."""
    if not relative or "\x00" in relative:
        raise ToolError("path must be a non-empty relative path without NUL characters")
    candidate = Path(relative)
    if candidate.is_absolute():
        raise ToolError(f"path {relative!r} is absolute; use a path relative to the workspace")
    if ".." in candidate.parts:
        raise ToolError(f"path {relative!r} contains '..'; paths must stay inside the workspace")
    resolved = (workspace / candidate).resolve()
    if resolved != workspace and workspace not in resolved.parents:
        raise ToolError(f"path {relative!r} escapes the workspace (through a symlink)")
    return resolved


def display(workspace: Path, path: Path) -> str:
    return str(path.relative_to(workspace)) if path != workspace else "."
