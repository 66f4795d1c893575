"""The built wheel works for a user whose own project follows the Temporal samples layout.

The wheel is built from a snapshot of the source tree and must install only the `ratchet` import
package (the repository's top-level workflows/, activities/ and worker/ become ratchet.workflows,
ratchet.activities and ratchet.worker). It is installed into a fresh venv that sees the main venv's
site-packages for the dependencies only, then driven from a throwaway project whose own
activities.py, workflows.py and worker.py are on PYTHONPATH and would shadow any top-level
`workflows`/`activities`/`worker` Ratchet still relied on: `ratchet --help`, `ratchet worker`
running a scripted run to DONE, `ratchet replay` of that run's history, and a clean SIGTERM exit.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import sys
import sysconfig
import zipfile
from functools import partial
from importlib import metadata
from pathlib import Path

import pytest

from devtools.workers import WorkerProcess
from ratchet.contracts import Phase
from ratchet.ops.settings import worker_environment
from tests.ops_workers import ROOT, run_command
from tests.runs import start

# The repository's top-level folders that install under `ratchet.` (pyproject's package-dir).
pytestmark = pytest.mark.e2e  # slow: `make test-e2e`, not `make test`

MAPPED = ("workflows", "activities", "worker")
SNAPSHOT_IGNORE = shutil.ignore_patterns(
    ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".ratchet", ".pytest_cache",
)
HELLO = {
    "agent": "coder",
    "objective": "Create hello.txt",
    "workspace": "hello",
    "model": {"provider": "scripted", "options": {"script": [
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "hello.txt", "content": "hi\n"}}]},
        {"content": "Wrote hello.txt"},
    ]}},
    "budget": {"max_steps": 5},
}

# A user's project, as the Temporal Python samples lay one out.
USER_PROJECT = {
    "activities.py": '''
from temporalio import activity


@activity.defn
async def say_hello(name: str) -> str:
    return f"Hello, {name}!"
''',
    "workflows.py": '''
from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities import say_hello


@workflow.defn
class SayHello:
    @workflow.run
    async def run(self, name: str) -> str:
        return await workflow.execute_activity(say_hello, name, start_to_close_timeout=timedelta(seconds=5))
''',
    "worker.py": '''
import asyncio

from temporalio.client import Client
from temporalio.worker import Worker

from activities import say_hello
from workflows import SayHello


async def main() -> None:
    client = await Client.connect("localhost:7233")
    await Worker(client, task_queue="hello", workflows=[SayHello], activities=[say_hello]).run()


if __name__ == "__main__":
    asyncio.run(main())
''',
}


run = partial(run_command, timeout=60)
"""`run_command` with time for pip and venv on a busy machine."""


def _version(dist: str) -> tuple[int, ...] | None:
    try:
        return tuple(int(p) for p in metadata.version(dist).split(".")[:2] if p.isdigit())
    except metadata.PackageNotFoundError:
        return None


async def build_wheel(tmp: Path) -> tuple[Path, Path]:
    """Build from a snapshot of the tree (the build writes build/ and *.egg-info next to its source,
    and a stale build/lib would leak into the wheel). Returns (wheel, snapshot)."""
    source, out = tmp / "src", tmp / "dist"
    shutil.copytree(ROOT, source, ignore=SNAPSHOT_IGNORE)
    pip = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--disable-pip-version-check", "-q", "-w", out]
    # pyproject asks for setuptools>=68 and wheel: build without isolation (offline) when this venv has them.
    setuptools_ok = (_version("setuptools") or (0,)) >= (68,)
    if setuptools_ok and _version("wheel") is not None:
        pip.append("--no-build-isolation")
    code, output = await run(*pip, source, cwd=tmp, timeout=120)
    assert code == 0, output
    [wheel] = out.glob("*.whl")
    return wheel, source


def expected_files(source: Path) -> set[str]:
    """Every module of every package in the snapshot, as its path in the wheel."""
    expected = set()
    roots = [(source / "ratchet", "ratchet")] + [(source / name, f"ratchet/{name}") for name in MAPPED]
    for folder, installed_as in roots:
        for init in folder.rglob("__init__.py"):
            package = init.parent
            for module in package.glob("*.py"):
                expected.add(f"{installed_as}/{module.relative_to(folder).as_posix()}")
    return expected


def check_wheel_contents(wheel: Path, source: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        [record] = [n for n in names if n.endswith(".dist-info/RECORD")]
        recorded = {line.split(",")[0] for line in zf.read(record).decode().splitlines() if line}
        [entry_points] = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        scripts = zf.read(entry_points).decode()
    assert recorded == names
    top_level = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    assert top_level == {"ratchet"}, f"the wheel installs more than `ratchet`: {sorted(top_level)}"
    missing = expected_files(source) - names
    assert not missing, f"modules in the source tree but not in the wheel (pyproject packages list?): {sorted(missing)}"
    assert "ratchet = ratchet.cli.main:main" in scripts, scripts


def venv_paths(venv: Path) -> tuple[Path, Path]:
    """(python, site-packages) of a venv at `venv`; the caller creates it."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    return venv / "bin" / "python", venv / "lib" / version / "site-packages"


async def install(wheel: Path, tmp: Path) -> Path:
    """A fresh venv with the wheel installed; the main venv's site-packages supply the dependencies
    through a plain .pth line, which does not run that directory's own .pth files (so not the
    editable install's finder). Returns the venv."""
    venv = tmp / "venv"
    code, output = await run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=tmp)
    assert code == 0, output
    python, site_packages = venv_paths(venv)
    # Install before the dependencies are visible: pip must not see the editable ratchet-agents.
    code, output = await run(
        sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index",
        "--disable-pip-version-check", "-q", wheel, cwd=tmp,
    )
    assert code == 0, output
    (site_packages / "_ratchet_test_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return venv


def user_project(tmp: Path) -> Path:
    project = tmp / "myproject"
    project.mkdir()
    for name, text in USER_PROJECT.items():
        (project / name).write_text(text.lstrip())
    return project


async def test_the_wheel_runs_a_samples_style_project(tmp_path: Path, client, settings):
    wheel, source = await build_wheel(tmp_path)
    check_wheel_contents(wheel, source)
    venv = await install(wheel, tmp_path)
    python, site_packages = venv_paths(venv)
    project = user_project(tmp_path)

    env = worker_environment(settings)
    for name in ("VIRTUAL_ENV", "PYTHONHOME", "PYTHONSTARTUP"):
        env.pop(name, None)
    env.update(
        PYTHONPATH=str(project), PYTHONNOUSERSITE="1", PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}",
    )

    # Ratchet comes from the new venv; the user's modules shadow any top-level workflows/activities/worker.
    code, output = await run(python, "-c", (
        "import activities, ratchet, ratchet.worker.main, workflows, worker\n"
        "print(ratchet.__file__); print(ratchet.worker.main.__file__)\n"
        "print(workflows.__file__); print(activities.__file__); print(worker.__file__)"
    ), cwd=project, env=env)
    assert code == 0, output
    ratchet_file, ratchet_worker_file, *user_files = output.split()
    assert Path(ratchet_file).is_relative_to(site_packages), output
    assert Path(ratchet_worker_file).is_relative_to(site_packages / "ratchet" / "worker"), output
    assert [Path(f) for f in user_files] == [project / "workflows.py", project / "activities.py", project / "worker.py"]

    ratchet = venv / "bin" / "ratchet"
    code, output = await run(ratchet, "--help", cwd=project, env=env)
    assert code == 0 and "worker" in output and "replay" in output, output

    # the venv's `ratchet worker` console script, run from the user's project
    worker = await WorkerProcess([ratchet, "worker"], env=env, cwd=project).start(timeout=30)
    try:
        handle = await start(client, settings, HELLO)
        result = await asyncio.wait_for(handle.result(), 30)
        assert result.phase == Phase.DONE, (result.last_error, worker.output)
        assert (settings.workspace_root / "hello" / "hello.txt").read_text() == "hi\n"

        history_file = tmp_path / f"{handle.workflow_id}.json"
        history_file.write_text((await handle.history()).to_json())
        code, output = await run(ratchet, "replay", history_file, cwd=project, env=env)
        assert code == 0, output
        assert any(line.startswith(handle.workflow_id) and " ok" in line for line in output.splitlines()), output
    finally:
        status = await worker.stop(signal.SIGTERM)
    assert status == 0, worker.output
