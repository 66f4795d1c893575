"""`python -m devtools.typecheck`: mypy over the production code as it installs (tests/static/test_static.py).

The repository keeps workflows/, activities/ and worker/ at the top level and installs them as
ratchet.workflows, ratchet.activities and ratchet.worker (pyproject's [tool.setuptools.package-dir]).
The editable install maps those names with an import hook, which no static checker runs, and in
the source tree there is no ratchet/workflows/ for `from ratchet.workflows.agent import ...`
(ratchet/plugin.py, ratchet/cli/, ratchet/client/). Neither mypy nor pyright can map a package
name to another directory, nor merge a second `ratchet` root into the first. So this lays the
installed layout out of symlinks, build/typecheck/ratchet/ with a link to each entry of ratchet/
and one to each of the three directories, and runs mypy there (`-p ratchet`, pyproject's
[tool.mypy]). Its report names the files by their paths in the source tree. mypy's cache stays
in build/typecheck/.mypy_cache: a first run takes about 25 s on one core, a run after a small
change a few seconds.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAYOUT = ROOT / "build" / "typecheck"
MAPPED = ("workflows", "activities", "worker")
"""The top-level directories that install inside the `ratchet` package, under the same names."""


def lay_out(dest: Path = LAYOUT) -> Path:
    """`dest`/ratchet as the package installs, out of symlinks into the source tree; `dest` back."""
    package = dest / "ratchet"
    if package.exists():
        shutil.rmtree(package)  # removes the links, never what they point to
    package.mkdir(parents=True)
    for entry in sorted((ROOT / "ratchet").iterdir()):
        if entry.name != "__pycache__":
            (package / entry.name).symlink_to(entry)
    for name in MAPPED:
        (package / name).symlink_to(ROOT / name, target_is_directory=True)
    return dest


def source_paths(report: str) -> str:
    """mypy's report with the layout's paths (ratchet/workflows/x.py) as the source tree's (workflows/x.py)."""
    return re.sub(rf"^ratchet/({'|'.join(MAPPED)})/", r"\1/", report, flags=re.MULTILINE)


def main() -> int:
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"), "-p", "ratchet"],
        cwd=lay_out(),
        capture_output=True,
        text=True,
    )
    sys.stdout.write(source_paths(done.stdout))
    sys.stderr.write(done.stderr)
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
