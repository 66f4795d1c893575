"""`UnconfinedSandbox` (RATCHET_SANDBOX=off): a plain subprocess of the worker, as the worker's user.

What it does: the worker's environment minus its secrets (ratchet/ops/secrets.py), `python` first
on PATH as this interpreter's, the wall-time limit and the output cap, and the process group killed
at the end. What it does not: everything else in `SandboxPolicy`. The program can read whatever the
worker can (other runs' workspaces, `.ratchet/`, the worker's own /proc/<pid>/environ with its
keys), write anywhere the worker can, reach any address, and leave a daemon behind
(tests/activities/test_sandbox.py shows each). For operators who run trusted code only, or sandbox the worker
as a whole.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

from ratchet.contracts.sandbox import SandboxPolicy
from ratchet.ops.secrets import child_environment
from ratchet.contracts.sandbox import SandboxResult
from ratchet.sandbox.base import Launch, supervise


class UnconfinedSandbox:
    name = "off"

    def probe(self) -> None:
        """Nothing to set up."""

    async def run(self, argv: Sequence[str], workspace: Path, policy: SandboxPolicy) -> SandboxResult:
        env = child_environment()
        env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
        exit_code, capture = await supervise(Launch(command=list(argv), env=env, cwd=workspace), policy, argv[0])
        return SandboxResult(exit_code=exit_code, output=capture.text(), dropped_bytes=capture.dropped)
