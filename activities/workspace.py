"""Confining file tools to a run's workspace directory, and making sure it is this host's."""

from __future__ import annotations

import re
from pathlib import Path

from temporalio import activity
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory

from ratchet.contracts import ErrorType
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


def host_queue(task_queue: str, host_id: str) -> str:
    """The host task queue `{task_queue}@{host_id}` (the same if `task_queue` is it already)."""
    suffix = f"@{host_id}"
    return task_queue if task_queue.endswith(suffix) else task_queue + suffix


def require_host(expected: str | None, host_id: str | None) -> None:
    """A workspace activity sent to the run's own queue (a local activity, or one the worker that
    scheduled it may take eagerly) acts only on the host holding the workspace, `expected`; on any
    other it raises NotOnThisHost before acting (benign: logged at DEBUG), and the workflow sends
    it to the host's queue (workflows/hosts.py). `expected` None: it was sent there already."""
    if expected is None:
        return
    here = host_queue(activity.info().task_queue, host_id) if host_id else None
    if here != expected:
        raise ApplicationError(
            f"the workspace is on {expected}, not on this worker's host ({here})",
            type=ErrorType.NOT_ON_THIS_HOST,
            non_retryable=True,
            category=ApplicationErrorCategory.BENIGN,
        )


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
