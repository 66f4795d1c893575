"""Files small enough to read in one sitting, checked by machine: no module of the production code
over MAX_MODULE_LINES lines and no function over MAX_FUNCTION_LINES (decorators included), outside
ratchet/testing/ (test servers and conformance suites, read as a whole)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHECKED = ("ratchet", "workflows", "activities", "worker")
EXEMPT = ROOT / "ratchet" / "testing"
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60


def modules() -> list[Path]:
    return [
        path
        for directory in CHECKED
        for path in sorted((ROOT / directory).rglob("*.py"))
        if not path.is_relative_to(EXEMPT)
    ]


def long_functions(source: str) -> list[tuple[int, str, int]]:
    """(line, name, length) of every function or method longer than MAX_FUNCTION_LINES."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            length = (node.end_lineno or node.lineno) - start + 1
            if length > MAX_FUNCTION_LINES:
                found.append((node.lineno, node.name, length))
    return found


def test_long_functions_are_found():
    lines = [f"    x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES)]
    assert long_functions("@decorated\ndef f():\n" + "".join(lines)) == [(2, "f", MAX_FUNCTION_LINES + 2)]
    assert long_functions("def f():\n" + "".join(lines[1:])) == []


def test_no_module_is_too_long_to_read_in_one_sitting():
    lengths = {path: len(path.read_text().splitlines()) for path in modules()}
    long = [f"{path.relative_to(ROOT)}: {n} lines" for path, n in lengths.items() if n > MAX_MODULE_LINES]
    assert not long, f"split by what each part holds (at most {MAX_MODULE_LINES} lines):\n" + "\n".join(long)


def test_no_function_is_longer_than_a_screen_or_two():
    long = [
        f"{path.relative_to(ROOT)}:{line} {name}: {length} lines"
        for path in modules()
        for line, name, length in long_functions(path.read_text())
    ]
    assert not long, f"at most {MAX_FUNCTION_LINES} lines a function:\n" + "\n".join(long)
