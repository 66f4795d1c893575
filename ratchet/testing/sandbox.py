"""Conformance suite for the `Sandbox` protocol (ratchet/sandbox/): the escapes every backend must
refuse, and what it must still let a program do.

A backend passes if every check passes against it. Each check is an attack a model could script
through `run_command` (or a test suite it edited, through the verifier), on a layout like a worker's:
`ROOT/.ratchet/ledger.sqlite3`, `ROOT/.ratchet/workspaces/this-run` (the workspace) and
`ROOT/.ratchet/workspaces/other-run` (another run's, with a secret in it). Every check can fail:
`UnconfinedSandbox` fails the `ESCAPES` ones (tests/activities/test_sandbox.py asserts it), which proves
each of them can see the escape it looks for.

`open_sandbox` must be picklable (a module-level function, or `functools.partial` of a class):
the environ check runs the backend in a spawned process, a "worker" started with a secret in its
environment. With pytest, one test per check (see tests/activities/test_sandbox.py)::

    @pytest.mark.parametrize("check", SandboxConformance.checks())
    async def test_conformance(check, tmp_path):
        await SandboxConformance(NsjailSandbox, tmp_path).run(check)

Checks fail with AssertionError. The suite leaves nothing running and nothing outside `root`
(the unconfined backend's writes to the host's /tmp are removed).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import multiprocessing
import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

from ratchet.contracts.sandbox import MIB, SandboxPolicy
from ratchet.contracts.sandbox import Sandbox, SandboxResult
from ratchet.sandbox.base import DiskQuotaExceeded, ProgramNotFound, WallTimeExceeded

__all__ = ["ESCAPES", "SandboxConformance", "main"]

ESCAPES = (
    "check_parent_environ_hidden",
    "check_env_allowlist_only",
    "check_other_workspace_unreadable",
    "check_ledger_unreadable",
    "check_no_writes_outside",
    "check_fork_bomb_bounded",
    "check_disk_quota",
    "check_loopback_unreachable_when_network_off",
    "check_symlink_out_of_workspace",
    "check_no_process_outlives_call",
    "check_memory_limit",
    "check_cpu_limit",
)
"""The checks a plain subprocess fails: what only a real sandbox refuses."""
SECRET_VARIABLE = "OPENAI_API_KEY"
"""A variable ratchet/ops/secrets.py names: the key a model would want."""
SETTLE_S = 2.5
"""How long a check waits after a call for a process that should be dead to show it is not."""


class SandboxConformance:
    def __init__(self, open_sandbox: Callable[[], Sandbox], root: Path) -> None:
        self.open_sandbox = open_sandbox
        self.sandbox = open_sandbox()
        self.root = Path(root).resolve()
        self.marker = f"ratchet-marker-{uuid.uuid4().hex}"
        """A value no check's program is given: seeing it in the output is an escape."""
        runs = self.root / ".ratchet" / "workspaces"
        self.workspace = runs / "this-run"
        self.other = runs / "other-run"
        self.ledger = self.root / ".ratchet" / "ledger.sqlite3"
        for directory in (self.workspace, self.other):
            directory.mkdir(parents=True, exist_ok=True)
        (self.other / "secret.txt").write_text(self.marker)
        self.ledger.write_text(self.marker)

    @classmethod
    def checks(cls) -> list[str]:
        """The names of the checks, in definition order (ids for pytest's parametrize)."""
        return [name for name in vars(cls) if name.startswith("check_")]

    async def run(self, name: str) -> None:
        if not name.startswith("check_"):
            raise ValueError(f"not a check: {name!r}")
        await getattr(self, name)()

    async def python(self, code: str, **policy: object) -> SandboxResult:
        """Run `python -c code` in the workspace under a default policy changed by `policy`."""
        return await self.sandbox.run(["python", "-c", code], self.workspace, SandboxPolicy(**policy))

    # --- what a program may still do ---

    async def check_python_runs(self) -> None:
        done = await self.python("import sys; print('python', sys.version_info[0])")
        assert (done.exit_code, done.output.strip()) == (0, "python 3"), done

    async def check_workspace_writes_persist(self) -> None:
        done = await self.python(
            "import pathlib; pathlib.Path('made/here.txt').parent.mkdir(); "
            "pathlib.Path('made/here.txt').write_text('kept')"
        )
        assert done.exit_code == 0, done
        assert (self.workspace / "made" / "here.txt").read_text() == "kept"

    async def check_exit_code_passes_through(self) -> None:
        done = await self.python("import sys; print('bye'); sys.exit(7)")
        assert (done.exit_code, done.output.strip()) == (7, "bye"), done

    async def check_missing_program_is_reported(self) -> None:
        try:
            await self.sandbox.run(["no-such-program-anywhere"], self.workspace, SandboxPolicy())
        except ProgramNotFound as exc:
            assert "no-such-program-anywhere" in str(exc)
        else:
            raise AssertionError("a missing program ran")

    async def check_output_cap(self) -> None:
        done = await self.python("import sys; sys.stdout.write('x' * 1_000_000 + 'END')", max_output_bytes=4096)
        assert len(done.output.encode()) <= 4096 + 100 and done.dropped_bytes > 0, len(done.output)
        assert done.output.endswith("END"), "the end of the output (where test summaries are) was lost"

    async def check_wall_time_kills_tree(self) -> None:
        code = _detached_writer(self.workspace / "tree-alive", detach=False) + "; time.sleep(30)"
        started = time.monotonic()
        try:
            await self.python(code, wall_time_s=1)
        except WallTimeExceeded:
            pass
        else:
            raise AssertionError("a program sleeping 30 s ended within a 1 s wall-time limit")
        assert time.monotonic() - started < 10, "the wall-time limit took far too long"
        await asyncio.sleep(SETTLE_S)
        assert not (self.workspace / "tree-alive").exists(), "a child outlived the wall-time kill"

    # --- escapes every backend must refuse ---

    async def check_parent_environ_hidden(self) -> None:
        """A worker started with a secret: its /proc/<pid>/environ, and every other readable environ."""
        code = (
            "import os, sys\n"
            "seen = [repr(dict(os.environ))]\n"
            "for pid in {os.getppid(), int(sys.argv[1])} | {int(p) for p in os.listdir('/proc') if p.isdigit()}:\n"
            "    try: seen.append(open(f'/proc/{pid}/environ', 'rb').read().decode(errors='replace'))\n"
            "    except OSError as exc: pass\n"
            "print('\\n'.join(seen))\n"
        )
        done = await self._in_worker_with_secret(["python", "-c", code])
        assert self.marker not in done.output, "the program read the worker's secret through /proc"

    async def check_env_allowlist_only(self) -> None:
        """Only allowlisted variables pass, and never a secret even when allowlisted."""
        plain, unlisted = "RATCHET_CONFORMANCE_PLAIN", "RATCHET_CONFORMANCE_UNLISTED"
        with _environment({plain: "allowed-value", unlisted: self.marker, SECRET_VARIABLE: self.marker}):
            done = await self.python("import os; print(dict(os.environ))", env=[plain, SECRET_VARIABLE])
        assert "allowed-value" in done.output, f"an allowlisted variable did not pass: {done.output}"
        assert self.marker not in done.output, "a variable outside the allowlist (or a secret) reached the program"

    async def check_other_workspace_unreadable(self) -> None:
        done = await self.python(_read_each([self.other / "secret.txt", "../other-run/secret.txt"]))
        assert self.marker not in done.output, "the program read another run's workspace"

    async def check_ledger_unreadable(self) -> None:
        done = await self.python(_read_each([self.ledger, "../../ledger.sqlite3"]))
        assert self.marker not in done.output, "the program read the ledger"

    async def check_no_writes_outside(self) -> None:
        host_tmp = Path("/tmp") / f"{self.marker}.txt"
        targets: list[Path | str] = [self.root / "outside.txt", self.other / "planted.txt", "../planted.txt", host_tmp]
        try:
            await self.python(_write_each(targets))
            written = [
                str(t)
                for t in (
                    self.root / "outside.txt",
                    self.other / "planted.txt",
                    self.workspace.parent / "planted.txt",
                    host_tmp,
                )
                if t.exists()
            ]
        finally:
            host_tmp.unlink(missing_ok=True)
        assert not written, f"the program wrote outside its workspace: {written}"

    async def check_fork_bomb_bounded(self) -> None:
        code = (
            "import subprocess\n"
            "alive = []\n"
            "try:\n"
            "    for _ in range(64): alive.append(subprocess.Popen(['sleep', '20']))\n"
            "except OSError as exc: print('refused:', exc)\n"
            "print('started', len(alive))\n"
        )
        done = await self.python(code, max_processes=16)
        started = int(done.output.rsplit("started", 1)[-1].split()[0]) if "started" in done.output else 0
        assert started < 16, f"{started} processes started under a limit of 16"
        again = await self.python("print('still works')")
        assert again.output.strip() == "still works", again
        assert subprocess.run(["true"]).returncode == 0, "the worker cannot start processes any more"

    async def check_disk_quota(self) -> None:
        """8 MiB quota: /tmp may not take more; the workspace may not keep more; one file not over 2 MiB."""
        scratch = Path("/tmp") / self.marker
        code = (
            "import os, sys\n"
            "def fill(directory, files):\n"
            "    os.makedirs(directory, exist_ok=True); n = 0\n"
            "    try:\n"
            "        for i in range(files):\n"
            "            with open(f'{directory}/f{i}', 'wb') as f: f.write(b'x' * 1048576); n += 1048576\n"
            "    except OSError: pass\n"
            "    return n\n"
            "big = 0\n"
            "try:\n"
            "    with open('big', 'wb') as f:\n"
            "        for _ in range(4): f.write(b'x' * 1048576); f.flush(); big += 1048576\n"
            "except OSError: pass\n"
            f"print('tmp', fill({str(scratch)!r}, 24), 'big', big)\n"
            "print('workspace', fill('fill', 24))\n"
        )
        try:
            try:
                done = await self.python(code, disk_bytes=8 * MIB, max_file_bytes=2 * MIB)
            except DiskQuotaExceeded:
                return  # refused after the call: the workspace held more than the quota
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
            words = done.output.split()
            tmp, big = int(words[words.index("tmp") + 1]), int(words[words.index("big") + 1])
            assert tmp <= 8 * MIB, f"{tmp} bytes written to /tmp under an 8 MiB quota"
            assert big <= 2 * MIB, f"a {big}-byte file under a 2 MiB file size limit"
            kept = sum(p.stat().st_size for p in self.workspace.rglob("*") if p.is_file())
            assert kept <= 8 * MIB, f"the workspace kept {kept} bytes under an 8 MiB quota"
        finally:
            shutil.rmtree(self.workspace / "fill", ignore_errors=True)
            (self.workspace / "big").unlink(missing_ok=True)

    async def check_loopback_unreachable_when_network_off(self) -> None:
        """A listener on the worker's 127.0.0.1 (as the Temporal dev server and Postgres are)."""
        with socket.socket() as listener:
            listener.bind(("127.0.0.1", 0))
            listener.listen(8)
            port = listener.getsockname()[1]
            code = (
                "import socket\n"
                f"try: socket.create_connection(('127.0.0.1', {port}), timeout=3); print('connected')\n"
                "except OSError as exc: print('refused:', exc)\n"
            )
            done = await self.python(code, network="off")
        assert "connected" not in done.output, "the program reached the worker's loopback with network off"

    async def check_symlink_out_of_workspace(self) -> None:
        """Symlinks planted in the workspace (by an earlier call) to /etc/passwd and another run."""
        (self.workspace / "passwd").symlink_to("/etc/passwd")
        (self.workspace / "theirs").symlink_to(self.other / "secret.txt")
        (self.workspace / "up").symlink_to(self.other)
        done = await self.python(_read_each(["passwd", "theirs", "up/secret.txt"]))
        assert self.marker not in done.output, "a symlink led the program into another run's workspace"
        assert "root:" not in done.output, "a symlink led the program to the host's /etc/passwd"

    async def check_no_process_outlives_call(self) -> None:
        """A daemon (double fork, setsid) started by the call must be dead once the call returns."""
        done = await self.python(_detached_writer(self.workspace / "daemon-alive", detach=True))
        assert done.exit_code == 0, done
        await asyncio.sleep(SETTLE_S)
        assert not (self.workspace / "daemon-alive").exists(), "a daemon outlived the call"

    async def check_memory_limit(self) -> None:
        code = "try: block = bytearray(512 * 1048576); print('allocated')\nexcept MemoryError: print('refused')\n"
        done = await self.python(code, memory_bytes=128 * MIB)
        assert "allocated" not in done.output, "512 MiB allocated under a 128 MiB limit"

    async def check_cpu_limit(self) -> None:
        """The CPU limit ends a busy loop before the wall-time limit does: generous, because on a
        loaded machine (load 7 on 2 cores) 1 s of CPU took more than 4 s of wall time."""
        started = time.monotonic()
        try:
            await self.python("while True: pass", cpu_s=1, wall_time_s=20)
        except WallTimeExceeded:
            raise AssertionError("a busy loop ran until the wall-time limit under a 1 s CPU limit") from None
        assert time.monotonic() - started < 20

    async def _in_worker_with_secret(self, argv: Sequence[str]) -> SandboxResult:
        """Run argv through a backend in a spawned process that started with the secret in its
        environment (its /proc/<pid>/environ holds it, as a worker's holds OPENAI_API_KEY)."""
        context = multiprocessing.get_context("spawn")
        with _environment({SECRET_VARIABLE: self.marker}):
            with concurrent.futures.ProcessPoolExecutor(1, mp_context=context) as pool:
                future = pool.submit(_run_in_worker, self.open_sandbox, list(argv), self.workspace)
                return await asyncio.wrap_future(future)


def _run_in_worker(open_sandbox: Callable[[], Sandbox], argv: list[str], workspace: Path) -> SandboxResult:
    return asyncio.run(open_sandbox().run([*argv, str(os.getpid())], workspace, SandboxPolicy()))


def _read_each(paths: Sequence[Path | str]) -> str:
    return (
        f"for path in {[str(p) for p in paths]!r}:\n"
        "    try: print(path, open(path).read())\n"
        "    except OSError as exc: print(path, 'refused:', exc)\n"
    )


def _write_each(paths: Sequence[Path | str]) -> str:
    return (
        f"for path in {[str(p) for p in paths]!r}:\n"
        "    try: open(path, 'w').write('escaped'); print(path, 'written')\n"
        "    except OSError as exc: print(path, 'refused:', exc)\n"
    )


def _detached_writer(marker: Path, detach: bool) -> str:
    """Code that forks a child (with `detach`: double fork and setsid, a daemon) which, 1.5 s
    later, creates `marker`: the file exists only if the child outlived what should kill it."""
    daemon = "os.setsid()\n    if os.fork(): os._exit(0)\n    " if detach else ""
    return (
        "import os, time\n"
        "if os.fork() == 0:\n"
        f"    {daemon}time.sleep(1.5); open({str(marker)!r}, 'w').write('alive'); os._exit(0)\n"
        "time.sleep(0.2)"
    )


class _environment:
    """Set variables in this process's environment for a block (restored after)."""

    def __init__(self, values: dict[str, str]) -> None:
        self.values = values
        self.saved: dict[str, str | None] = {}

    def __enter__(self) -> None:
        self.saved = {name: os.environ.get(name) for name in self.values}
        os.environ.update(self.values)

    def __exit__(self, *exc: object) -> None:
        for name, value in self.saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def main(argv: Sequence[str]) -> int:
    """`python -m ratchet.testing.sandbox [nsjail|off] [CHECK ...]`: the suite (or the checks named)
    against a backend, as a report; exit status 1 if a check failed."""
    import functools
    import tempfile

    from ratchet.sandbox.choose import open_sandbox

    backend, names = (argv[0] if argv else "nsjail"), list(argv[1:]) or SandboxConformance.checks()
    failed = 0
    for check in names:
        with tempfile.TemporaryDirectory() as tmp:
            try:
                asyncio.run(SandboxConformance(functools.partial(open_sandbox, backend), Path(tmp)).run(check))
                print(f"refused  {check}" if check in ESCAPES else f"ok       {check}")
            except AssertionError as exc:
                failed += 1
                print(f"FAILED   {check}: {exc}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
