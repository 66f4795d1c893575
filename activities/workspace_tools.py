"""Built-in tools over a run's workspace: read_file, write_file, list_files, run_command.

Every path is confined to the workspace (no absolute paths, no '..', no symlink escapes).
run_command takes an argv list, never goes through a shell, and runs in the worker's sandbox.
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel, Field

from .commands import cap, run_program
from .workspace import confine, display
from ratchet.stores.artifacts import ArtifactRef
from ratchet.core.tools import ToolContext, ToolError, ToolOutput, tool, undo_for, undo_record

MAX_READ_BYTES = 256 * 1024
MAX_WRITE_BYTES = 4 * 1024 * 1024


class ReadFileArgs(BaseModel):
    path: str = Field(description="File path relative to the workspace.")


class WriteFileArgs(BaseModel):
    path: str = Field(description="File path relative to the workspace.")
    content: str = Field(description="The complete new content of the file.")


class ListFilesArgs(BaseModel):
    path: str = Field(".", description="Directory relative to the workspace.")


class RunCommandArgs(BaseModel):
    argv: list[str] = Field(min_length=1, max_length=200, description="Program and arguments; no shell.")
    timeout_s: float = Field(60, gt=0, le=600, description="Kill the command after this many seconds.")


@tool(effect="read_only", timeout_s=30, workspace=True)
def read_file(ctx: ToolContext, args: ReadFileArgs) -> str:
    """Read a UTF-8 text file from the workspace."""
    path = confine(ctx.workspace, args.path)
    if not path.is_file():
        raise ToolError(f"{args.path}: no such file")
    data = path.read_bytes()
    if len(data) > MAX_READ_BYTES:
        raise ToolError(f"{args.path}: {len(data)} bytes is over the {MAX_READ_BYTES}-byte read limit")
    return data.decode("utf-8", errors="replace")


@tool(effect="compensable", timeout_s=30, idempotent=True, workspace=True)
def write_file(ctx: ToolContext, args: WriteFileArgs) -> ToolOutput:
    """Create or overwrite a text file in the workspace with the given content."""
    path = confine(ctx.workspace, args.path)
    data = args.content.encode()
    if len(data) > MAX_WRITE_BYTES:
        raise ToolError(f"{args.path}: content over the {MAX_WRITE_BYTES}-byte write limit")
    if path.is_dir():
        raise ToolError(f"{args.path} is a directory")
    previous = ctx.artifacts.put(path.read_bytes()) if path.is_file() else None
    created = _missing_parents(ctx.workspace, path)
    undo = undo_record(
        f"restore {args.path} ({previous.size} bytes)" if previous else f"delete {args.path}",
        path=args.path,
        previous=previous.model_dump() if previous else None,
        created_dirs=[display(ctx.workspace, d) for d in created],
    )
    ctx.record_undo(undo)
    path.parent.mkdir(parents=True, exist_ok=True)
    _atomic_write(path, data)
    return ToolOutput(output=f"wrote {len(data)} bytes to {display(ctx.workspace, path)}", undo=undo)


@undo_for("write_file")
def undo_write_file(ctx: ToolContext, args: WriteFileArgs, undo: dict | None) -> str:
    """Restore the previous bytes exactly, or remove a file the call created."""
    if undo is None:
        return "nothing to undo: the call never got as far as writing"
    path = confine(ctx.workspace, undo["path"])
    if undo["previous"] is not None:
        _atomic_write(path, ctx.artifacts.get(ArtifactRef.model_validate(undo["previous"])))
        return f"restored {undo['path']}"
    path.unlink(missing_ok=True)
    path.with_name(f".{path.name}.ratchet-tmp").unlink(missing_ok=True)
    for rel in undo.get("created_dirs", []):  # deepest first; only if the call left them empty
        directory = confine(ctx.workspace, rel)
        if directory.is_dir() and not any(directory.iterdir()):
            directory.rmdir()
    return f"removed {undo['path']}"


@tool(effect="read_only", timeout_s=30, workspace=True)
def list_files(ctx: ToolContext, args: ListFilesArgs) -> str:
    """List files under a workspace directory, recursively (at most 500 entries)."""
    base = confine(ctx.workspace, args.path)
    if not base.is_dir():
        raise ToolError(f"{args.path}: no such directory")
    names = []
    for path in sorted(base.rglob("*")):
        if any(part.startswith(".") or part == "__pycache__" for part in path.relative_to(base).parts):
            continue
        names.append(display(ctx.workspace, path) + ("/" if path.is_dir() else ""))
        if len(names) >= 500:
            names.append("... (truncated)")
            break
    return "\n".join(names) or "(empty)"


@tool(effect="irreversible", timeout_s=660, max_attempts=1, runs_code=True)
async def run_command(ctx: ToolContext, args: RunCommandArgs) -> str:
    """Run a program in the workspace (argv list, no shell) and return its exit code and output."""
    done = await run_program(ctx.sandbox, args.argv, ctx.workspace, ctx.sandbox_policy.within(args.timeout_s))
    return f"exit code {done.exit_code}\n{cap(done.output)}"


def _missing_parents(workspace: Path, path: Path) -> list[Path]:
    """The directories a write to `path` will create, deepest first."""
    missing = []
    parent = path.parent
    while parent != workspace and not parent.exists():
        missing.append(parent)
        parent = parent.parent
    return missing


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.ratchet-tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
