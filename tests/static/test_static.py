"""Static checks over the production code (ratchet/, workflows/, activities/, worker/), in `make test`:
ruff's lint rules as pyproject's [tool.ruff.lint] selects them (over tests/ too), ruff's formatting, mypy as
[tool.mypy] configures it (through devtools/typecheck.py, over the package as it installs), and a
reason beside every `# type: ignore`."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHECKED = ("ratchet", "workflows", "activities", "worker")
LINTED = (*CHECKED, "tests")
RUFF = Path(sys.executable).parent / "ruff"


def run(*argv: str | Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in argv], cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def test_ruff_finds_nothing_in_the_code_or_its_tests():
    done = run(RUFF, "check", "--output-format", "concise", *LINTED)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_production_code_is_formatted():
    done = run(RUFF, "format", "--check", *CHECKED)
    assert done.returncode == 0, done.stdout + done.stderr + "\n(`ruff format` rewrites them)"


def test_mypy_finds_nothing_in_the_production_code():
    """About 21 s of one core with an empty mypy cache (build/typecheck/.mypy_cache; measured on a
    shared 2-core machine), under 2 s after: in `make test`."""
    done = run(sys.executable, "-m", "devtools.typecheck", timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr


IGNORE = re.compile(r"#\s*(?:type|pyright):\s*ignore\b(?P<codes>\[[^\]]*\])?(?P<rest>.*)$")


def bare_ignores(text: str) -> list[str]:
    """The `# type: ignore` / `# pyright: ignore` comments without their error codes and a reason
    (a comment of its own after them on the same line), as `line: text`."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        match = IGNORE.search(line)
        if match and not (match["codes"] and re.match(r"\s+#\s*\S", match["rest"])):
            found.append(f"{number}: {line.strip()}")
    return found


def test_bare_ignores_are_found():
    assert bare_ignores("x = f()  # type: ignore[arg-type]  # f's stub lacks the overload\n") == []
    assert bare_ignores("x = f()  # pyright: ignore[reportCallIssue]  # f's stub lacks the overload") == []
    assert bare_ignores("a\nx = f()  # type: ignore\n") == ["2: x = f()  # type: ignore"]
    assert bare_ignores("x = f()  # type: ignore[arg-type]") == ["1: x = f()  # type: ignore[arg-type]"]
    assert bare_ignores("x = f()  # type: ignore  # no code") == ["1: x = f()  # type: ignore  # no code"]


def test_every_type_ignore_says_why():
    found = [
        f"{path.relative_to(ROOT)}:{where}"
        for directory in CHECKED
        for path in sorted((ROOT / directory).rglob("*.py"))
        for where in bare_ignores(path.read_text())
    ]
    assert not found, "a `# type: ignore[code]` needs its reason after it, `  # why`:\n" + "\n".join(found)
