"""Checkpoint activities: verify a step (evidence, patch, workspace snapshot) and fork from one.

`checkpoint.verify` runs the profile's verifier in the workspace and returns the evidence, the
accepted patch as a unified diff of the files changed since the last checkpoint, and a manifest
of the workspace's files (content-addressed, so unchanged files cost nothing) that a fork restores.
A workspace whose files are, byte for byte, those a run of the same verifier in the same sandbox
left when it did not fail (it passed, or found no test) is not verified again: the evidence is that
run's, marked `reused` (a coder's final answer after read-only steps was a whole
`python -m unittest` start-up, most of such a run's CPU: 7 of a step's 21 ms at 20 runs at once).
Such verifications are kept in the ledger (key `verified:{digest}` of the verifier, the sandbox
and the files' manifest), so a restarted worker, or another host on a shared ledger, reuses them
too (a fresh worker's first coder run re-ran the project's tests: 62 of its 264 ms).
`checkpoint.fork` reads a checkpoint from another run (by query) and restores its files into the
new run's workspace. `snapshot` and `restore` are the manifest code the workspace activities
(activities/hosts.py) share.
"""

from __future__ import annotations

import asyncio
import difflib
import hashlib
import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

from temporalio import activity
from temporalio.client import Client, WorkflowQueryFailedError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError

from ratchet.contracts.activities import FORK, VERIFY
from .commands import cap, run_program
from .heartbeat import heartbeating
from .workspace import confine, host_queue, open_workspace, require_host
from .archive import transcript_slice
from ratchet.stores.artifacts import ArtifactStore, get_json, json_bytes, put_json
from ratchet.contracts import (
    AgentState,
    ArtifactRef,
    Checkpoint,
    Evidence,
    Forked,
    LoadCheckpoint,
    VerifyRequest,
    VerifyResult,
    WorkspaceBinding,
)
from ratchet.core.tools import ToolError
from ratchet.ops.redaction import redacted
from ratchet.sandbox import Sandbox
from ratchet.stores.ledger import EntryStatus, Ledger
from ratchet.contracts import ErrorType
from ratchet.contracts import STATE_QUERY, TranscriptSlice

MAX_SNAPSHOT_FILES = 2000
_UNITTEST = re.compile(r"Ran (\d+) tests?")
_UNITTEST_FAILED = re.compile(r"FAILED \((?:failures=(\d+))?(?:, )?(?:errors=(\d+))?")
_PYTEST = re.compile(r"(?m)^=*\s*(no tests ran|(?:\d+ [a-z]+(?:, )?)+) in \d+(?:\.\d+)?s\b")
_PYTEST_COUNT = re.compile(r"(\d+) (passed|failed|errors?)\b")
NO_TESTS_EXIT = 5
"""The exit code of pytest (and of unittest since Python 3.12) when it collected no test."""


class CheckpointActivities:
    def __init__(
        self,
        workspace_root: Path,
        artifacts: ArtifactStore,
        client: Client | None = None,
        host_id: str = "local",
        sandbox: Sandbox | None = None,
        ledger: Ledger | None = None,
    ) -> None:
        self.workspace_root = Path(workspace_root)
        self.artifacts = artifacts
        self.client = client
        self.host_id = host_id
        self.sandbox = sandbox
        """Where the verifier runs (the worker's sandbox, as `run_command`)."""
        self.ledger = ledger
        """Where verifications that did not fail are kept (none: every workspace is verified)."""

    @activity.defn(name=VERIFY.name)
    async def verify(self, req: VerifyRequest) -> VerifyResult:
        require_host(req.host, self.host_id)
        workspace = open_workspace(self.workspace_root, req.workspace)
        known = await asyncio.to_thread(self._kept, req, workspace)
        if known is not None:
            patch_ref = await asyncio.to_thread(self._patch, workspace, req.changed)
            reused = known.evidence.model_copy(update={"reused": True})
            return VerifyResult(evidence=reused, patch_ref=patch_ref, workspace_ref=known.workspace_ref)
        result = await self._verify(req, workspace)
        if self.ledger is not None and not result.evidence.failed and result.workspace_ref is not None:
            await asyncio.to_thread(self._keep, _kept_key(req, result.workspace_ref.digest), result)
        return result

    def _kept(self, req: VerifyRequest, workspace: Path) -> VerifyResult | None:
        """In a thread: the kept verification of these files, if any."""
        if self.ledger is None:
            return None
        entry = self.ledger.get(_kept_key(req, manifest_digest(workspace)))
        if entry is None or entry.status != EntryStatus.COMPLETED or entry.result is None:
            return None
        return VerifyResult.model_validate(entry.result)

    def _keep(self, key: str, result: VerifyResult) -> None:
        """In a thread: kept under `key` (the first verification of these files stays; one whose
        keeping was cut between `begin` and `complete` is completed now)."""
        assert self.ledger is not None
        found = self.ledger.begin(key)
        if found is None or found.status == EntryStatus.STARTED:
            kept = VerifyResult(evidence=result.evidence, workspace_ref=result.workspace_ref)
            self.ledger.complete(key, kept.model_dump(mode="json", exclude_defaults=True))

    async def _verify(self, req: VerifyRequest, workspace: Path) -> VerifyResult:
        try:
            async with heartbeating():
                done = await run_program(
                    self.sandbox, req.verifier.argv, workspace, req.sandbox.within(req.verifier.timeout_s)
                )
            exit_code, output = done.exit_code, done.output
        except ToolError as exc:
            exit_code, output = 127, str(exc)
        output = redacted(output)  # before the full output is stored (the evidence is redacted anyway)
        run, failed = count_tests(output)
        no_tests = ran_no_test(req.verifier.argv, exit_code, run)
        evidence = Evidence(
            argv=req.verifier.argv,
            exit_code=exit_code,
            passed=exit_code == 0 and not no_tests,
            no_tests=no_tests,
            tests_run=run,
            tests_failed=failed,
            output=cap(output, 4000),
            output_ref=await asyncio.to_thread(self.artifacts.put, output.encode(), "text/plain"),
        )
        if evidence.failed:
            return VerifyResult(evidence=evidence)
        async with heartbeating():  # a large workspace's snapshot takes a while
            patch_ref, workspace_ref = await asyncio.to_thread(self._accept, workspace, req.changed)
        return VerifyResult(evidence=evidence, patch_ref=patch_ref, workspace_ref=workspace_ref)

    def _accept(
        self, workspace: Path, changed: dict[str, ArtifactRef | None]
    ) -> tuple[ArtifactRef | None, ArtifactRef]:
        """In a thread (file reads and artifact puts): the patch and the workspace's manifest."""
        return self._patch(workspace, changed), snapshot(workspace, self.artifacts)

    def _patch(self, workspace: Path, changed: dict[str, ArtifactRef | None]) -> ArtifactRef | None:
        chunks: list[str] = []
        for rel, before_ref in sorted(changed.items()):
            before = self.artifacts.get(before_ref).decode(errors="replace") if before_ref else ""
            path = confine(workspace, rel)
            after = path.read_text(errors="replace") if path.is_file() else ""
            chunks.extend(
                difflib.unified_diff(
                    before.splitlines(keepends=True),
                    after.splitlines(keepends=True),
                    fromfile=f"a/{rel}" if before_ref else "/dev/null",
                    tofile=f"b/{rel}",
                )
            )
        return self.artifacts.put("".join(chunks).encode(), "text/x-diff") if chunks else None

    @activity.defn(name=FORK.name)
    async def fork(self, req: LoadCheckpoint) -> Forked:
        """Copy a checkpoint of another run and restore its files into `req.workspace` on this
        host, which then holds the new run's workspace (the binding). The source run is only
        queried, never changed."""
        checkpoint = await self._load(req.workflow_id, req.checkpoint_id)
        workspace = open_workspace(self.workspace_root, req.workspace)
        if checkpoint.workspace_ref is not None:
            await asyncio.to_thread(restore, workspace, self.artifacts, checkpoint.workspace_ref)
        manifest = checkpoint.workspace_ref or await asyncio.to_thread(snapshot, workspace, self.artifacts)
        return Forked(
            checkpoint=checkpoint, binding=WorkspaceBinding(host_queue=self.host_queue(), manifest_ref=manifest)
        )

    def host_queue(self) -> str:
        return host_queue(activity.info().task_queue, self.host_id)

    async def _load(self, workflow_id: str, checkpoint_id: str) -> Checkpoint:
        assert self.client is not None, "checkpoint.fork needs a Temporal client"
        try:
            state = await self.client.get_workflow_handle(workflow_id).query(STATE_QUERY, result_type=AgentState)
        except (RPCError, WorkflowQueryFailedError) as exc:
            raise _invalid(f"resume_from.workflow_id: cannot read run {workflow_id!r}: {exc}") from None
        found = next((c for c in state.effects.checkpoints.items if c.id == checkpoint_id), None) if state else None
        if found is None:
            known = ", ".join(c.id for c in state.effects.checkpoints.items) if state else ""
            raise _invalid(
                f"resume_from.checkpoint_id: run {workflow_id!r} has no checkpoint {checkpoint_id!r}"
                f" (it has: {known or 'none'})"
            )
        held, transcript = state.conversation.messages, state.conversation.transcript
        if found.unsent < held.base and transcript is not None:  # older than what the last handover kept
            base = found.unsent
            slice_ = TranscriptSlice(digest=transcript, start=base, stop=found.messages_len)
            messages = await asyncio.to_thread(transcript_slice, self.artifacts, slice_)
        else:
            base, messages = held.base, held.items[: held.local(found.messages_len)]
        return found.model_copy(update={"messages": messages, "messages_base": base})


def _files(workspace: Path) -> Iterator[tuple[str, bytes]]:
    """The files a snapshot holds, in order: regular files, no symlinks or `__pycache__`."""
    count = 0
    for path in sorted(workspace.rglob("*")):
        rel = path.relative_to(workspace)
        if path.is_symlink() or not path.is_file() or "__pycache__" in rel.parts:
            continue
        yield str(rel), path.read_bytes()
        count += 1
        if count >= MAX_SNAPSHOT_FILES:
            return


def snapshot(workspace: Path, artifacts: ArtifactStore) -> ArtifactRef:
    """Store every file of the workspace (content-addressed: unchanged files cost nothing) and a
    manifest {relative path: ArtifactRef} of them; return the manifest's reference."""
    manifest = {rel: artifacts.put(data).model_dump() for rel, data in _files(workspace)}
    return put_json(artifacts, manifest)


def manifest_digest(workspace: Path) -> str:
    """The digest `snapshot` would give the workspace's manifest, storing nothing."""
    manifest = {
        rel: ArtifactRef(digest=hashlib.sha256(data).hexdigest(), size=len(data)).model_dump()
        for rel, data in _files(workspace)
    }
    return hashlib.sha256(json_bytes(manifest)).hexdigest()


def _kept_key(req: VerifyRequest, manifest: str) -> str:
    """A kept verification's ledger key: the verifier, the sandbox it ran in, the workspace's files
    (not under a workflow id: no run's `claim` or `forget` touches it)."""
    what = json.dumps([req.verifier.model_dump(mode="json"), req.sandbox.model_dump(mode="json"), manifest])
    return f"verified:{hashlib.sha256(what.encode()).hexdigest()}"


def restore(workspace: Path, artifacts: ArtifactStore, manifest_ref: ArtifactRef | None) -> int:
    """Empty the workspace, then write the manifest's files into it (none: leave it empty).
    Returns how many files were written."""
    for child in workspace.iterdir():
        shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
    if manifest_ref is None:
        return 0
    files = get_json(artifacts, manifest_ref)
    for rel, ref in files.items():
        path = confine(workspace, rel)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(artifacts.get(ArtifactRef.model_validate(ref)))
    return len(files)


def ran_no_test(argv: list[str], exit_code: int, tests_run: int | None) -> bool:
    """The verifier ran no test: its output counts none (unittest's `Ran 0 tests`, pytest's `no tests
    ran`, every test skipped) and it exited 0 or 5, or pytest exited 5 (no test collected) without
    printing a count (`-qq`)."""
    if tests_run == 0:
        return exit_code in (0, NO_TESTS_EXIT)
    pytest = any(Path(word).name in ("pytest", "py.test") for word in argv)
    return tests_run is None and exit_code == NO_TESTS_EXIT and pytest


def count_tests(output: str) -> tuple[int | None, int | None]:
    """(tests run, tests failed) from unittest or pytest output, if recognisable; (0, 0) when it
    says no test ran (skipped tests do not count: they showed nothing)."""
    if match := _UNITTEST.search(output):
        failed = _UNITTEST_FAILED.search(output)
        bad = sum(int(n) for n in failed.groups() if n) if failed else 0
        return int(match.group(1)), bad
    summaries = _PYTEST.findall(output)
    if summaries:
        counts = {kind.rstrip("s"): int(n) for n, kind in _PYTEST_COUNT.findall(summaries[-1])}
        bad = counts.get("failed", 0) + counts.get("error", 0)
        return counts.get("passed", 0) + bad, bad
    return None, None


def _invalid(message: str) -> ApplicationError:
    return ApplicationError(message, type=ErrorType.INVALID_INPUT, non_retryable=True)
