"""The README's sections after the set-up, run as a user pastes them after `make up`'s lines: each
command of each bash block verbatim, in the README's order, doing what its comment says (a block
with `&` and `kill %1` in one shell).

Run here: "Checkpoints, rollback, fork" (with "Your own repository and its tests"), "Background
agents: approvals, messages, time", "Before every deploy: replay", "Deploying a new version" (a
second build's worker beside make up's), `ratchet serve`'s block, "Tools
from MCP servers" and Production's `ratchet health` (compose and migrate-stores need Docker and
servers of one's own). Before them, the first section and sessions run too, so that each section
runs after the ones before it; their checks are tests/install/test_up.py's and tests/surfaces/test_readme_session.py's.
Where a person would read a view before typing the next line (the call ids `ratchet watch --once`
lists), the test shows the view again until it has what the next line needs."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import time

import pytest

from devtools.devserver import free_port
from tests.install.test_up import README_SECTION as FIRST
from tests.install.test_up import ROOT, readme_blocks, run_in_bash, shell_lines, up, user_env
from tests.surfaces.test_readme_session import README_SECTION as SESSIONS

pytestmark = pytest.mark.e2e  # slow: `make test-e2e`, not `make test`

CHECKPOINTS = "## Checkpoints, rollback, fork"
BACKGROUND = "## Background agents: approvals, messages, time"
REPLAY = "## Before every deploy: replay"
DEPLOYS = "## Deploying a new version"
SERVE = "## Your own tools and profiles"  # its "Live output" part: `ratchet serve`
SERVE_PORT = 8765  # `ratchet serve`'s default, which the block's curls name
MCP = "## Tools from MCP servers"
PRODUCTION = "## Production"
WRITTEN = ("fix.json", "ops-7.json")
"""Files the blocks write in the repository's directory (`cat > ... <<'EOF'`)."""


def commands(block: str) -> list[str]:
    """A block's commands as bash reads them: continued lines (`\\`), open quotes and here-documents
    joined to the line that starts them; comment lines and blank lines left out."""
    found: list[str] = []
    lines = iter(block.splitlines())
    for line in lines:
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        command = [line]
        heredoc = re.search(r"<<'?(\w+)'?", line)
        while heredoc and command[-1] != heredoc.group(1) or not heredoc and unfinished("\n".join(command)):
            command.append(next(lines))
        found.append("\n".join(command))
    return found


def unfinished(text: str) -> bool:
    """Whether bash reads on past `text`: it ends in `\\`, or a quote is open."""
    return text.endswith("\\") or subprocess.run(["bash", "-n", "-c", text], capture_output=True).returncode != 0


class Terminal:
    """make up's lines, then one command at a time, as in a new terminal each time."""

    def __init__(self, lines: str) -> None:
        self.lines, self.env = lines, user_env()  # no OPENAI_API_KEY: offline

    def run(self, command: str) -> subprocess.CompletedProcess:
        return run_in_bash(self.lines + "\n" + command, env=self.env)

    def until(self, command: str, shows: str, timeout: float = 60) -> subprocess.CompletedProcess:
        """`command` again until its output shows `shows` (a person looking again)."""
        deadline = time.monotonic() + timeout
        while True:
            done = self.run(command)
            if shows in done.stdout or time.monotonic() > deadline:
                return done
            time.sleep(0.5)


def whole(terminal: Terminal, heading: str) -> subprocess.CompletedProcess:
    """The one bash block under `heading` in one shell, as its `&` and `kill %1` need."""
    [block] = readme_blocks(heading)
    done = terminal.run(block)
    assert done.returncode == 0, shown(done)
    return done


def shown(done: subprocess.CompletedProcess) -> str:
    return f"{done.args[-1].splitlines()[-1]}: exit {done.returncode}\n{done.stdout}{done.stderr}"


def ran_ok(terminal: Terminal, block: str) -> list[subprocess.CompletedProcess]:
    ran = [terminal.run(command) for command in commands(block)]
    for done in ran:
        assert done.returncode == 0, shown(done)
    return ran


def first_sections(terminal: Terminal) -> None:
    """The first section and the sessions block, whose checks are tests/install/test_up.py's and
    tests/surfaces/test_readme_session.py's: here only that they run, so that what follows runs after them."""
    plain, ratchet_cli = readme_blocks(FIRST)[:2]
    done = terminal.run(plain)
    assert done.returncode == 0, shown(done)
    for command in commands(ratchet_cli) + commands(readme_blocks(SESSIONS)[0]):
        done = terminal.run(command)
        assert done.returncode == (1 if command.startswith("ratchet cancel") else 0), shown(done)  # as commented


def checkpoints_and_own_repository(terminal: Terminal, workspaces) -> None:
    checkpoints, own_repository = readme_blocks(CHECKPOINTS)
    start, listed, dry_run, fork, undo_all, plan, rollback, rolled_back, fork_b = ran_ok(terminal, checkpoints)
    assert "checkpoint cp-2" in start.stdout and "[DONE]" in start.stdout, shown(start)
    assert re.search(r"^cp-1 .* exit 0, 1 tests", listed.stdout, re.M) and "\ncp-2 " in listed.stdout, shown(listed)
    assert "restore login.py" in dry_run.stdout and "delete" not in dry_run.stdout, shown(dry_run)
    assert re.match(r"started fix-login-42-fork-\w+ from fix-login-42 cp-1", fork.stdout), shown(fork)
    assert "undone 3" in undo_all.stdout and not (workspaces / "fix-login-42" / "login.py").exists(), shown(undo_all)
    assert "restore login.py" in plan.stdout, shown(plan)
    assert "fix-login-42/rollback/cp-1" in rollback.stdout, shown(rollback)
    assert "already_undone" in rolled_back.stdout and "COMPLETED" in rolled_back.stdout, shown(rolled_back)
    assert "fix-login-42-b" in fork_b.stdout, shown(fork_b)
    forked = terminal.run("temporal workflow result --workflow-id fix-login-42-b")
    assert '"answer":"kept cp-1"' in forked.stdout and (workspaces / "fix-login-42-b" / "test_login.py").exists(), (
        shown(forked)
    )

    copy, write, fix, listed = ran_ok(terminal, own_repository)
    assert "checkpoint cp-1" in fix.stdout and "[DONE]" in fix.stdout, shown(fix)
    assert "return a + b" in (workspaces / "calc" / "calc.py").read_text()
    assert re.search(r"^cp-1 .*python -m unittest -v -> exit 0, 2 tests", listed.stdout, re.M), shown(listed)


def background_agents(terminal: Terminal) -> None:
    ops, schedule = readme_blocks(BACKGROUND)
    ran = []
    for command in commands(ops):
        if command.startswith("ratchet watch ops-7 --once"):  # its four calls, once they wait
            done = terminal.until(command, "awaiting approval: call_1_3")
        elif command.startswith("temporal workflow list"):  # visibility catches up
            done = terminal.until(command, "ops-7")
        elif "--name pause" in command:  # step 2's wait has started
            terminal.until("ratchet watch ops-7 --once", "[ACTING] step 2")
            done = terminal.run(command)
        else:
            done = terminal.run(command)
        assert done.returncode == 0, shown(done)
        ran.append(done)
    _, start, view, listed, approve, reject, send, approve_2, reject_3, signal_, pause, resume, transcript, watch = ran
    assert start.stdout.strip() == "started ops-7", shown(start)
    assert "call_1_0 create_ticket" in view.stdout and "[AWAITING_APPROVAL]" in view.stdout, shown(view)
    assert "approved call_1_0" in approve.stdout and "rejected call_1_1" in reject.stdout, shown(reject)
    assert "approved call_1_2" in approve_2.stdout and "rejected call_1_3" in reject_3.stdout, shown(reject_3)
    for text in (
        "also update the runbook",
        "and link the change log",
        "interrupted before it finished",
        "a person rejected this call: not during business hours",
    ):
        assert text in transcript.stdout, shown(transcript)
    assert "[PAUSED]" in watch.stdout and "[DONE]" in watch.stdout, shown(watch)
    assert "\nopened the deploy and key rotation tickets\n" in watch.stdout, shown(watch)

    ran_ok(terminal, schedule)
    described = terminal.run("temporal schedule describe --schedule-id nightly-triage")
    assert described.returncode == 0 and "AgentWorkflow" in described.stdout, shown(described)


async def test_the_readme_sections_after_make_up_run_as_written(tmp_path):
    with socket.socket() as probe:  # the serve block's curls would reach whatever listens there
        assert probe.connect_ex(("127.0.0.1", SERVE_PORT)) != 0, f"port {SERVE_PORT} is taken: `ratchet serve` needs it"
    written = [name for name in WRITTEN if not (ROOT / name).exists()]
    assert written == list(WRITTEN), f"{WRITTEN} exist in {ROOT}: the blocks would overwrite them"
    server = await up(tmp_path / "up", "--port", str(free_port()), "--ui-port", str(free_port())).start()
    try:
        terminal, workspaces = Terminal(shell_lines(server.output)), tmp_path / "up" / "workspaces"
        first_sections(terminal)
        checkpoints_and_own_repository(terminal, workspaces)
        background_agents(terminal)
        corpus, on_server = ran_ok(terminal, readme_blocks(REPLAY)[0])
        assert re.search(r"^history-plain-run +\d+ +ok ", corpus.stdout, re.M), shown(corpus)
        assert "no runs match" in on_server.stderr, shown(on_server)  # every run above has ended
        (ROOT / ".ratchet").mkdir(exist_ok=True)  # as `make up` leaves it: the second worker's log goes there
        deployed = whole(terminal, DEPLOYS)
        assert re.search(r"^next +- +INACTIVE", deployed.stdout, re.M), shown(deployed)
        assert "build next can take over" in deployed.stdout, shown(deployed)
        assert "next ramping at 10% of new runs" in deployed.stdout, shown(deployed)
        assert "guard: RAMPING next at 10%" in deployed.stdout, shown(deployed)
        assert "rolled back from next: its ramp ended; its guard stopped" in deployed.stdout, shown(deployed)
        served = whole(terminal, SERVE)
        assert '"answer":"opened the deploy and key rotation tickets"' in served.stdout, shown(served)  # ops-7's end
        assert '"type":"RUN_FINISHED","threadId":"t-1"' in served.stdout, shown(served)
        assert (workspaces / "t-1" / "hello.txt").read_text() == "hi\n"
        (ROOT / ".ratchet").mkdir(exist_ok=True)  # servers.json's tracker database, as `make up` leaves it
        mcp = whole(terminal, MCP)
        assert "close_issue(id=" in mcp.stdout and "undone 1" in mcp.stdout, shown(mcp)
        [health] = [c for c in commands(readme_blocks(PRODUCTION)[0]) if c.startswith("ratchet health")]
        healthy = terminal.run(health)
        assert healthy.returncode == 0 and healthy.stdout.count("ok ") == 3, shown(healthy)
    finally:
        for name in written:
            (ROOT / name).unlink(missing_ok=True)
        code = await server.stop(signal.SIGINT, timeout=60)
    assert code == 0, server.output
