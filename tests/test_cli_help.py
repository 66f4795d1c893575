"""Every `ratchet` verb explains itself: a description, help for each argument, an example."""

from __future__ import annotations

import argparse

from ratchet.cli.main import parser


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
