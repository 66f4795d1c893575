"""What the Makefile installs (`make -n` against a venv of the test's own): `make demo` and `make up`
only the `demo` extra; `make test` after them the `test` extra, which then counts for the demo too."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def planned(target: str, venv: Path) -> str:
    """The commands `make TARGET` would run with VENV=venv."""
    done = subprocess.run(["make", "-n", target, f"VENV={venv}"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_make_demo_and_make_up_install_the_demo_extra_only(tmp_path):
    for target in ("demo", "up"):
        commands = planned(target, tmp_path / "venv")
        assert "-m venv" in commands and "pip install -q -e '.[demo]'" in commands, commands
        assert ".[test]" not in commands, commands


def test_make_test_after_make_demo_installs_the_rest_and_marks_both(tmp_path):
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").touch()
    (venv / ".installed-demo").touch()  # as `make demo` leaves it
    assert "pip install" not in planned("demo", venv)
    commands = planned("test", venv)
    assert "-m venv" not in commands and "pip install -q -e '.[test]'" in commands, commands
    assert f"touch {venv}/.installed {venv}/.installed-demo" in commands, commands


def test_the_test_extra_includes_the_demo_extra():
    """What lets `make test`'s install mark the demo's as done."""
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert "ratchet-agents[demo]" in extras["test"]
