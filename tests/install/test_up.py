"""`make up` end to end: `python -m devtools.up` starts a dev server and a worker that stay up; the
lines it prints, then the README's first block, run verbatim in bash, start a run that completes;
Ctrl-C (SIGINT) stops everything it started."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from devtools.devserver import free_port
from devtools.up import READY, STOPPED
from devtools.workers import WorkerProcess

pytestmark = pytest.mark.e2e  # slow: `make test-e2e`, not `make test`

ROOT = Path(__file__).resolve().parents[2]
README_SECTION = "## Start an agent with the plain Temporal CLI"


def readme_blocks(heading: str) -> list[str]:
    """The ```bash blocks of the README's section under `heading`, as a user would paste them."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index(heading + "\n"):]
    section = section[:section.find("\n## ", 1) if "\n## " in section[1:] else None]
    blocks = re.findall(r"^```bash\n(.*?)^```$", section, re.S | re.M)
    assert blocks, f"no bash block under {heading!r}"
    return blocks


def one_per_line(block: str) -> list[str]:
    """The commands of a block whose commands each fit on one line (no continuation, no open quote)."""
    return [line for line in block.splitlines() if line.strip() and not line.lstrip().startswith("#")]


ELSEWHERE = {"TEMPORAL_NAMESPACE": "prod", "TEMPORAL_API_KEY": "for-another-server"}
"""Settings of a terminal used with another Temporal server: `make up` must not apply them."""


def user_env(**extra: str) -> dict[str, str]:
    """A new terminal's environment: no Ratchet or Temporal settings but `extra`, the venv not on PATH."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OPENAI_", "ANTHROPIC_", "RATCHET_", "TEMPORAL_")) and k != "VIRTUAL_ENV"}
    venv_bin = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != venv_bin)
    return {**env, **extra}


def up(state_dir: Path, *args: str, env: dict[str, str] | None = None) -> WorkerProcess:
    return WorkerProcess([sys.executable, "-u", "-m", "devtools.up", "--dir", state_dir, *args],
                         env=env or user_env(), cwd=ROOT, ready=READY, ready_timeout=120, name="make up")


def shell_lines(output: str) -> str:
    """The indented lines `make up` prints for another terminal (cd, activate, exports)."""
    block = output.split("In another terminal", 1)[1].split(READY, 1)[0]
    return "\n".join(line.strip() for line in block.splitlines() if line.startswith("  "))


def run_in_bash(script: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-e", "-c", script], env=env or user_env(), cwd="/", capture_output=True,
                          text=True, timeout=120)


def processes_mentioning(text: str) -> list[str]:
    """Processes of this user whose command line or environment mentions `text`."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            seen = (proc / "cmdline").read_bytes() + (proc / "environ").read_bytes()
        except OSError:  # gone, or another user's
            continue
        if text.encode() in seen:
            command = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            found.append(f"{proc.name}: {command[:200]}")
    return found


async def test_make_up_serves_the_readme_block_until_ctrl_c(tmp_path):
    """Port taken: another is used and said so. Started from a terminal set up for another Temporal
    server, it ignores those settings and its lines unset them. The README's first section, after the
    printed lines: the plain Temporal CLI block completes its run; the `ratchet` block's commands
    each do what their comment says. SIGINT: exit 0, worker and server gone."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        terminal, ui_port = user_env(**ELSEWHERE), free_port()
        server = await up(tmp_path / "up", "--port", str(port), "--ui-port", str(ui_port), env=terminal).start()
        try:
            assert f"port {port} is taken" in server.output, server.output
            lines = shell_lines(server.output)
            assert re.search(r"^cd .* && source \.venv/bin/activate$", lines, re.M), lines
            assert re.search(r"^export TEMPORAL_ADDRESS=127\.0\.0\.1:\d+$", lines, re.M), lines
            assert f":{port}\n" not in lines and "unset TEMPORAL_API_KEY TEMPORAL_NAMESPACE" in lines, lines
            assert f"export RATCHET_TEMPORAL_UI_URL=http://127.0.0.1:{ui_port}/namespaces/default" in lines, lines
            plain_temporal, ratchet_cli = readme_blocks(README_SECTION)[:2]
            done = run_in_bash(lines + "\n" + plain_temporal, env=terminal)
            assert done.returncode == 0, done.stdout + done.stderr
            assert re.search(r"Status\s+COMPLETED", done.stdout) and '"phase":"DONE"' in done.stdout, done.stdout
            assert (tmp_path / "up" / "workspaces" / "hello" / "hello.txt").read_text() == "hi\n"
            ran = {command.split()[1]: run_in_bash(lines + "\n" + command, env=terminal)
                   for command in one_per_line(ratchet_cli)}
            assert list(ran) == ["start", "list", "result", "transcript", "cancel"], list(ran)
            shown = {verb: f"{verb}: exit {r.returncode}\n{r.stdout}{r.stderr}" for verb, r in ran.items()}
            assert ran["start"].returncode == 0 and "DONE" in ran["start"].stdout, shown["start"]
            assert ran["list"].returncode == 0 and "workflow id" in ran["list"].stdout, shown["list"]  # none running
            assert ran["result"].returncode == 0 and "Wrote hello.txt" in ran["result"].stdout, shown["result"]
            assert ran["transcript"].returncode == 0 and '"Create hello.txt"' in ran["transcript"].stdout, shown
            assert ran["cancel"].returncode == 1 and "has ended" in shown["cancel"], shown["cancel"]  # as commented
            assert (tmp_path / "up" / "workspaces" / "hello-2" / "hello.txt").read_text() == "hi\n"
        finally:
            code = await server.stop(signal.SIGINT, timeout=60)
    assert code == 0, server.output
    assert STOPPED in server.output, server.output
    assert not processes_mentioning(str(tmp_path)), processes_mentioning(str(tmp_path))


async def test_make_up_keeps_its_runs_across_restarts_and_runs_once_per_directory(tmp_path):
    """A second `make up` on the same directory is refused while the first runs (two servers on one
    SQLite file); restarted, the server still has the runs it had."""
    first = await up(tmp_path / "up", "--port", str(free_port()), "--ui-port", str(free_port())).start()
    try:
        lines = shell_lines(first.output)
        start = "temporal workflow start --type AgentWorkflow --task-queue ratchet --workflow-id kept-1 --input '{}'"
        assert run_in_bash(f"{lines}\n{start}").returncode == 0
        second = subprocess.run([sys.executable, "-m", "devtools.up", "--dir", str(tmp_path / "up")], env=user_env(),
                                cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert second.returncode == 1 and "already running" in second.stderr, second.stdout + second.stderr
    finally:
        assert await first.stop(signal.SIGINT, timeout=60) == 0, first.output
    again = await up(tmp_path / "up", "--port", str(free_port()), "--ui-port", str(free_port())).start()
    try:
        described = run_in_bash(f"{shell_lines(again.output)}\ntemporal workflow describe --workflow-id kept-1")
        assert described.returncode == 0 and "AgentWorkflow" in described.stdout, described.stdout + described.stderr
    finally:
        assert await again.stop(signal.SIGINT, timeout=60) == 0, again.output
    assert not processes_mentioning(str(tmp_path)), processes_mentioning(str(tmp_path))
