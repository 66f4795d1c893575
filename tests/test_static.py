"""Static checks over the production code, in `make test`: ruff's pyflakes rules (unused imports,
undefined names, redefinitions) and syntax errors, as pyproject's [tool.ruff.lint] selects them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHECKED = ("ratchet", "workflows", "activities", "worker")


def test_ruff_finds_nothing_in_the_production_code():
    ruff = Path(sys.executable).parent / "ruff"
    done = subprocess.run([str(ruff), "check", "--output-format", "concise", *CHECKED], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
