"""The README's sessions block, run command by command as a user pastes it after `make up`'s lines:
offline on examples/session-script.json, each command doing what its comment says."""

from __future__ import annotations

import re
import signal

import pytest

from devtools.devserver import free_port
from tests.install.test_up import one_per_line, readme_blocks, run_in_bash, shell_lines, up, user_env

pytestmark = pytest.mark.e2e  # slow: `make test-e2e`, not `make test`

README_SECTION = "## Sessions: conversations that last"


async def test_the_readme_session_block_runs_offline_turn_after_turn(tmp_path):
    server = await up(tmp_path / "up", "--port", str(free_port()), "--ui-port", str(free_port())).start()
    try:
        lines, terminal = shell_lines(server.output), user_env()  # no OPENAI_API_KEY
        [block] = readme_blocks(README_SECTION)
        ran = []
        for command in one_per_line(block):
            done = run_in_bash(lines + "\n" + command, env=terminal)
            ran.append(done)
            assert done.returncode == 0, f"{command}: exit {done.returncode}\n{done.stdout}{done.stderr}"
            if "--message-id m-3" in command:  # as commented: the same id again is answered once
                again = run_in_bash(lines + "\n" + command, env=terminal)
                assert (again.returncode, again.stdout, again.stderr) == (0, done.stdout, done.stderr), again
        start, tests_run, run_them, listed, dry_run, now, close = ran
        assert start.stdout.strip() == "started chat-7", start.stdout + start.stderr
        assert "python -m unittest" in tests_run.stdout and "# turn 2: answered" in tests_run.stderr, tests_run
        assert "Added test_hello.py" in run_them.stdout and "# turn 3: answered" in run_them.stderr, run_them
        assert re.search(r"Running\s+chat-7\s+AgentWorkflow", listed.stdout), listed.stdout
        assert "delete test_hello.py" in dry_run.stdout and "turns removed: 3" in dry_run.stdout, dry_run.stdout
        assert "dry run" in dry_run.stdout and (tmp_path / "up/workspaces/chat-7/test_hello.py").exists()
        assert "status:answered" in now.stdout and "turn:4" in now.stdout, now.stdout
        assert "closing after turn 4" in close.stdout, close.stdout
    finally:
        code = await server.stop(signal.SIGINT, timeout=60)
    assert code == 0, server.output
