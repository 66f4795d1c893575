"""The sandbox (ratchet/sandbox/): every escape of the conformance suite refused by nsjail, as root
and as an unprivileged user; the same checks seeing each escape through the unconfined backend (so
each can fail); backend selection, the probe, and what a worker does without a working sandbox."""

from __future__ import annotations

import logging
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from temporalio.exceptions import ApplicationError

from ratchet.activities.commands import run_program
from ratchet.contracts import SandboxPolicy
from ratchet.core.tools import ToolError
from ratchet.plugin import builtin_tools, usable_sandbox
from ratchet.sandbox import SandboxUnavailable, UnavailableSandbox, open_sandbox
from ratchet.sandbox.base import SANDBOX_UNAVAILABLE
from ratchet.sandbox.nsjail import SANDBOX_ID, NsjailSandbox, disk_usage, hand_over
from ratchet.sandbox.unconfined import UnconfinedSandbox
from ratchet.testing.sandbox import ESCAPES, SandboxConformance

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("check", SandboxConformance.checks())
async def test_nsjail_conformance(check: str, tmp_path: Path) -> None:
    await SandboxConformance(NsjailSandbox, tmp_path).run(check)


@pytest.mark.parametrize("check", SandboxConformance.checks())
async def test_each_escape_check_can_fail(check: str, tmp_path: Path) -> None:
    """Through a plain subprocess, every escape check sees its escape (and only those fail)."""
    suite = SandboxConformance(UnconfinedSandbox, tmp_path)
    if check not in ESCAPES:
        await suite.run(check)
        return
    with pytest.raises(AssertionError):
        await suite.run(check)


UNPRIVILEGED_CHECKS = (
    "check_python_runs", "check_workspace_writes_persist", "check_parent_environ_hidden", "check_ledger_unreadable",
    "check_no_writes_outside", "check_fork_bomb_bounded", "check_loopback_unreachable_when_network_off",
    "check_no_process_outlives_call",
)


@pytest.mark.skipif(os.geteuid() != 0, reason="runs as root only to switch to nobody (as any other user, every test here is that case)")
def test_nsjail_conformance_as_unprivileged_user() -> None:
    """`make test` as an ordinary user: no root anywhere, the same escapes refused."""
    system_python = Path("/usr/bin/python3")
    if not system_python.exists() or _minor(system_python) != sys.version_info[:2]:
        pytest.skip("needs a system Python of this minor version for the unprivileged user's venv")
    nobody = pwd.getpwnam("nobody")
    home = Path(tempfile.mkdtemp(prefix="ratchet-unprivileged-"))  # pytest's tmp_path is root's alone
    try:
        os.chown(home, nobody.pw_uid, nobody.pw_gid)
        _run_as(nobody, home, system_python)
    finally:
        shutil.rmtree(home, ignore_errors=True)


def _run_as(user: pwd.struct_passwd, home: Path, system_python: Path) -> None:
    site = next(p for p in sys.path if p.endswith("site-packages") and p.startswith(sys.prefix))
    script = (
        f"{system_python} -m venv --without-pip {home}/venv && cd {home} && "
        f"HOME={home} PYTHONPATH={REPO}:{site} {home}/venv/bin/python -m ratchet.testing.sandbox nsjail "
        + " ".join(UNPRIVILEGED_CHECKS)
    )
    done = subprocess.run(["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups",
                           "/bin/sh", "-c", script], capture_output=True, text=True, timeout=240, env={"PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("refused") + done.stdout.count("ok ") == len(UNPRIVILEGED_CHECKS), done.stdout


@pytest.mark.skipif(os.geteuid() != 0, reason="the workspace is handed to the sandbox user only by a root worker")
def test_the_workspace_is_handed_to_the_sandbox_user_without_following_links(tmp_path: Path) -> None:
    workspace, outside = tmp_path / "ws", tmp_path / "outside.txt"
    (workspace / "src").mkdir(parents=True)
    (workspace / "src" / "main.py").write_text("print(1)")
    outside.write_text("not the sandbox's")
    (workspace / "link").symlink_to(outside)
    os.link(outside, workspace / "hardlink")
    hand_over(workspace, SANDBOX_ID)
    owner = {p.name: p.lstat().st_uid for p in (workspace, workspace / "src", workspace / "src" / "main.py", workspace / "link")}
    assert set(owner.values()) == {SANDBOX_ID}, owner
    assert outside.stat().st_uid == 0, "a symlink's target outside the workspace was handed over"
    assert (workspace / "hardlink").stat().st_uid == 0, "a file with a link outside the workspace was handed over"
    expected = sum(os.lstat(Path(d, n)).st_blocks * 512 for d, ds, fs in os.walk(workspace) for n in ds + fs)
    assert disk_usage(workspace) == expected + os.lstat(workspace).st_blocks * 512


def test_backends_by_setting(caplog: pytest.LogCaptureFixture) -> None:
    assert isinstance(open_sandbox("nsjail"), NsjailSandbox)
    with caplog.at_level(logging.WARNING, logger="ratchet.sandbox"):
        assert isinstance(open_sandbox("off"), UnconfinedSandbox)
    assert any("UNCONFINED" in r.getMessage() and r.levelno == logging.WARNING for r in caplog.records)


def test_a_worker_without_a_sandbox_offers_no_code_running_tools(caplog: pytest.LogCaptureFixture) -> None:
    broken = NsjailSandbox(binary=Path("/nonexistent/nsjail"))
    with caplog.at_level(logging.ERROR, logger="ratchet.plugin"):
        sandbox, tools = usable_sandbox(broken, builtin_tools())
    assert isinstance(sandbox, UnavailableSandbox)
    assert "run_command" not in tools.tools and "write_file" in tools.tools
    assert "run_command" in builtin_tools().tools, "the shared registry must not change"
    assert any("RATCHET_SANDBOX=off" in r.getMessage() for r in caplog.records)
    working, same = usable_sandbox(NsjailSandbox(), builtin_tools())
    assert isinstance(working, NsjailSandbox) and "run_command" in same.tools


async def test_run_program_errors(tmp_path: Path) -> None:
    """Program problems reach the model as ToolError; a worker without a sandbox fails non-retryably."""
    with pytest.raises(ToolError, match="cannot run 'no-such-program'"):
        await run_program(NsjailSandbox(), ["no-such-program"], tmp_path, SandboxPolicy())
    with pytest.raises(ToolError, match="timed out after 0.5s"):
        await run_program(NsjailSandbox(), ["sleep", "5"], tmp_path, SandboxPolicy(wall_time_s=0.5))
    with pytest.raises(ApplicationError) as caught:
        await run_program(UnavailableSandbox("no user namespaces"), ["true"], tmp_path, SandboxPolicy())
    assert caught.value.non_retryable and caught.value.type == SANDBOX_UNAVAILABLE
    assert "no user namespaces" in str(caught.value)
    with pytest.raises(SandboxUnavailable):
        NsjailSandbox(binary=Path("/nonexistent/nsjail")).probe()


async def test_network_on_uses_the_hosts_network(tmp_path: Path) -> None:
    """`network: on` is all or nothing: the worker's loopback is reachable (no per-host filter)."""
    import socket

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        code = f"import socket; socket.create_connection(('127.0.0.1', {listener.getsockname()[1]}), timeout=3); print('connected')"
        done = await NsjailSandbox().run(["python", "-c", code], tmp_path, SandboxPolicy(network="on"))
    assert "connected" in done.output, done


def _minor(python: Path) -> tuple[int, int]:
    out = subprocess.run([str(python), "-c", "import sys; print(*sys.version_info[:2])"], capture_output=True, text=True)
    major, minor = out.stdout.split()
    return int(major), int(minor)
