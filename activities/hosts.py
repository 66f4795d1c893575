"""Workspaces across hosts: `workspace.open` and `workspace.rehydrate`.

A run's workspace is a directory on one host. Both activities run on the SHARED task queue, so
whichever host takes one becomes the run's workspace host; each returns that host's task queue
(`{task queue}@{host id}`, served by the worker's second, host-queue worker: plugin.py) and the
manifest of the files it holds (activities/checkpoints.py's `snapshot` / `restore`).

- `workspace.open`: open (create if missing) the run's workspace on this host and snapshot it; the
  run's initial snapshot. Where the run may use local activities it runs as one, so the host of
  the worker running the workflow holds the workspace (and the read-only tools run locally there).
- `workspace.rehydrate`: the old host is gone; empty the workspace on this host (stale files from an
  earlier binding must not survive) and restore a manifest into it (a checkpoint's, or the initial
  snapshot).
- `workspace.remove`: a shadow's private workspace deleted on this host (`ratchet shadow clean`,
  workflows/shadow_clean.py, which names only the workspaces of shadows' states).
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

from temporalio import activity

from ratchet.contracts.activities import WORKSPACE_OPEN, WORKSPACE_REHYDRATE, WORKSPACE_REMOVE
from ratchet.contracts.shadow import RemoveWorkspace
from .checkpoints import restore, snapshot
from .heartbeat import heartbeating
from .workspace import host_queue, open_workspace
from ratchet.contracts import OpenWorkspace, RehydrateWorkspace, WorkspaceBinding
from ratchet.stores.artifacts import ArtifactStore

WORKSPACE_ACTIVITIES = (WORKSPACE_OPEN.name, WORKSPACE_REHYDRATE.name, WORKSPACE_REMOVE.name)


class WorkspaceActivities:
    def __init__(self, workspace_root: Path, artifacts: ArtifactStore, host_id: str) -> None:
        self.workspace_root = Path(workspace_root)
        self.artifacts = artifacts
        self.host_id = host_id

    @activity.defn(name=WORKSPACE_OPEN.name)
    async def open(self, req: OpenWorkspace) -> WorkspaceBinding:
        """A regular activity on the shared queue, or a local one (binding the workflow's host)."""
        workspace = open_workspace(self.workspace_root, req.workspace)
        if activity.info().is_local:  # a dead worker fails its workflow task; the next one opens anew
            manifest = await asyncio.to_thread(snapshot, workspace, self.artifacts)
        else:
            async with heartbeating():  # a host killed here is noticed by the heartbeat timeout, not in 5 min
                manifest = await asyncio.to_thread(snapshot, workspace, self.artifacts)
        activity.logger.info("workspace %s opened on host %s", req.workspace, self.host_id)
        return WorkspaceBinding(host_queue=self.host_queue(), manifest_ref=manifest)

    @activity.defn(name=WORKSPACE_REHYDRATE.name)
    async def rehydrate(self, req: RehydrateWorkspace) -> WorkspaceBinding:
        workspace = open_workspace(self.workspace_root, req.workspace)
        async with heartbeating():
            files = await asyncio.to_thread(restore, workspace, self.artifacts, req.manifest_ref)
        activity.logger.info("workspace %s rehydrated on host %s: %d files", req.workspace, self.host_id, files)
        return WorkspaceBinding(host_queue=self.host_queue(), manifest_ref=req.manifest_ref)

    @activity.defn(name=WORKSPACE_REMOVE.name)
    async def remove(self, req: RemoveWorkspace) -> int:
        """Delete the workspace directory on this host: the number of files it held (0: none here)."""
        workspace = open_workspace(self.workspace_root, req.workspace)  # the name checked, as for a run
        async with heartbeating():
            files = await asyncio.to_thread(_remove, workspace)
        activity.logger.info("workspace %s removed on host %s: %d files", req.workspace, self.host_id, files)
        return files

    def host_queue(self) -> str:
        return host_queue(activity.info().task_queue, self.host_id)

    def all(self) -> list:
        return [self.open, self.rehydrate, self.remove]


def _remove(workspace: Path) -> int:
    files = sum(1 for p in workspace.rglob("*") if p.is_file() or p.is_symlink())
    shutil.rmtree(workspace)
    return files
