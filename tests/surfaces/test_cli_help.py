"""Every `ratchet` verb explains itself: a description, help for each argument, an example."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from ratchet.cli.main import parser
from ratchet.cli.table import VERBS


def verbs() -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def test_every_verb_has_a_description_argument_help_and_an_example():
    found = verbs()
    assert {"start", "list", "result", "cancel", "transcript", "decide", "watch", "rollback", "fork",
            "approve", "reject", "send", "checkpoints", "worker", "config", "replay", "health"} <= set(found)
    for name, cmd in found.items():
        assert cmd.description, f"`ratchet {name}` has no description"
        assert cmd.epilog and cmd.epilog.startswith("example: ratchet") or "ratchet " in (cmd.epilog or ""), \
            f"`ratchet {name}` has no example"
        for action in cmd._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            assert action.help, f"`ratchet {name}`: {action.dest} has no help"
        assert "example:" in cmd.format_help()


HEAVY = ("temporalio", "pydantic", "openai")
"""What `ratchet --help` and a verb's parse must not import (each costs a tenth of a second or more)."""


def imported(*argv: str) -> tuple[int, set[str]]:
    """`ratchet ARGV`'s exit status and the top-level packages it imported (`-X importtime`)."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "ratchet.cli", *argv],
                          capture_output=True, text=True, timeout=60)
    lines = [line.split("|")[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")]
    return done.returncode, {name.split(".")[0] for name in lines}


@pytest.mark.parametrize("argv", [["--help"], ["start", "--help"], ["start", "coder", "x", "--max-steps", "many"]])
def test_help_and_a_verbs_parse_import_no_sdk(argv):
    status, modules = imported(*argv)
    assert status == (2 if "many" in argv else 0)
    assert "ratchet" in modules
    assert not modules & set(HEAVY), f"`ratchet {' '.join(argv)}` imported {sorted(modules & set(HEAVY))}"


def test_no_verbs_help_imports_temporal_or_a_model_sdk():
    """decide and rollback quote the contracts in their help (pydantic): the others do not even that."""
    for verb in VERBS:
        status, modules = imported(verb.name, "--help")
        assert status == 0, verb.name
        assert not modules & {"temporalio", "openai"}, f"`ratchet {verb.name} --help` imported {modules & set(HEAVY)}"
        if verb.name not in ("decide", "rollback"):
            assert "pydantic" not in modules, f"`ratchet {verb.name} --help` imported pydantic"


def test_every_verb_runs_a_function():
    for verb in VERBS:
        assert callable(verb.handler()), verb.run
