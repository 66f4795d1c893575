"""An earlier version of Ratchet beside the working tree, each run by its own worker processes
(tests/deploys/test_deploys_versions.py, `make chaos`'s deploys line: docs/RELIABILITY.md).

`checkout(V1, dest)` lays out the commit's code as the package installs (`ratchet/`, with
`workflows/`, `activities/` and `worker/` inside it, per the commit's own pyproject `package-dir`)
and its `tests/` (the test plugins), straight from git (`git archive`: the history of a clone is
all it needs). A worker of it runs `python -m ratchet.worker` with PYTHONPATH set to that layout
and the layout as its working directory. That is enough to run the old code, not the working
tree's: the venv's editable install puts its finder at the END of `sys.meta_path`, after the
path-based finder, so `ratchet` and every submodule resolve under PYTHONPATH first. Two ways to
get it wrong, both avoided here: PYTHONPATH at the commit's source root (then `ratchet.workflows`,
which is `workflows/` there, is not under `ratchet/`, and falls through to the editable finder:
the working tree's workflows), and the working tree as the working directory (`python -m` puts it
first on `sys.path`). `Checkout.identify` asks a process of that environment which files it
imports and which build id it computes, so a test can prove it.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tarfile
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from devtools.workers import WorkerProcess

ROOT = Path(__file__).resolve().parents[1]
V1 = "ea581cd50ebee632c98848336df783216ec7904b"
"""The first commit with worker versioning (issue #39): `v1` beside the working tree's `v2`."""
V1_GUARD = "c11149aca64bf9cd9da6dafd8cb3495c308fb93f"
"""The first commit whose workers run the ramp guard (`ratchet deploy ramp --guard`): the guard runs
on the baseline (current) build, so a ramp guarded on an older build cannot be watched; the `v1` of
the guard's test."""
V2_PLUGIN = "tests.plugins.deploys_v2"
"""Loaded by v2's workers only: a changed prompt, so v2 is a new build (and a run started on it
shows it) even while the working tree's code equals v1's."""
V2_PROMPT = " Answer as release two."
"""What tests/plugins/deploys_v2.py appends to the system prompt of the profiles it changes."""
V2_BROKEN_PLUGIN = "tests.plugins.deploys_broken"
"""Loaded by a broken v2's workers too: `probe_echo` fails its run there (never import it in a test
process: it replaces the tool in the process's registry)."""
V2_BROKEN = "release two broke probe_echo"


@dataclass(frozen=True)
class Identity:
    """What a Python process of an environment imports and computes."""

    build_id: str
    """The default build id (`RatchetPlugin.build_id` with RATCHET_BUILD_ID unset)."""
    files: dict[str, str]
    """The `__file__` of `ratchet` and of each package mapped into it."""

    def under(self, root: Path) -> bool:
        return all(Path(f).resolve().is_relative_to(root.resolve()) for f in self.files.values())


IDENTIFY = """
import json, ratchet, ratchet.workflows, ratchet.activities, ratchet.worker
from ratchet.plugin import RatchetOptions, RatchetPlugin
mods = (ratchet, ratchet.workflows, ratchet.activities, ratchet.worker)
build = RatchetPlugin(RatchetOptions.from_settings()).build_id
print(json.dumps({"build_id": build, "files": {m.__name__: m.__file__ for m in mods}}))
"""


@dataclass(frozen=True)
class Checkout:
    """A version of Ratchet's code: a commit laid out under `root`, or the working tree (`root` ROOT)."""

    commit: str | None
    root: Path

    def environment(self, env: Mapping[str, str]) -> dict[str, str]:
        """`env` (a worker's: tests/ops_workers.py, `Stack.worker_env`) running this version."""
        return {**env, "PYTHONPATH": str(self.root)}

    def worker(
        self, env: Mapping[str, str], log: Path | None = None, name: str = "worker", ready_timeout: float = 60
    ) -> WorkerProcess:
        """A `python -m ratchet.worker` process of this version (not started)."""
        argv = [sys.executable, "-m", "ratchet.worker"]
        return WorkerProcess(
            argv, env=self.environment(env), cwd=self.root, log=log, name=name, ready_timeout=ready_timeout
        )

    def identify(self, env: Mapping[str, str]) -> Identity:
        """Which files a process of this version imports, and the build id it computes."""
        done = subprocess.run(
            [sys.executable, "-c", IDENTIFY],
            env=self.environment({k: v for k, v in env.items() if k != "RATCHET_BUILD_ID"}),
            cwd=self.root,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if done.returncode != 0:
            raise RuntimeError(f"identify {self.commit or 'the working tree'}: {done.stderr[-2000:]}")
        found = json.loads(done.stdout.splitlines()[-1])
        return Identity(found["build_id"], found["files"])


WORKING_TREE = Checkout(None, ROOT)


def checkout(commit: str, dest: Path, repo: Path = ROOT) -> Checkout:
    """`commit`'s code laid out as it installs under `dest` (made if missing; reused if there)."""
    done = dest / ".complete"
    if done.exists():
        return Checkout(commit, dest)
    dest.mkdir(parents=True, exist_ok=True)
    pyproject = tomllib.loads(_git(repo, "show", f"{commit}:pyproject.toml").decode())
    mapped = pyproject["tool"]["setuptools"].get("package-dir", {})
    _extract(repo, commit, "ratchet", dest / "ratchet")
    for package, directory in mapped.items():
        _extract(repo, commit, directory, dest.joinpath(*package.split(".")))
    _extract(repo, commit, "tests", dest / "tests")
    done.write_text(commit + "\n")
    return Checkout(commit, dest)


def _extract(repo: Path, commit: str, path: str, into: Path) -> None:
    archive = _git(repo, "archive", "--format=tar", f"{commit}:{path}")
    into.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")


def _git(repo: Path, *args: str) -> bytes:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, timeout=120)
    if done.returncode != 0:
        raise RuntimeError(
            f"git {' '.join(args)}: {done.stderr.decode(errors='replace').strip()} (a clone with its history "
            f"has every commit; a shallow one: `git fetch --unshallow`)"
        )
    return done.stdout
