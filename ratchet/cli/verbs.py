"""One way to declare a `ratchet` verb: a one-line help, a description and an example."""

from __future__ import annotations

import argparse


def verb(sub, name: str, help: str, example: str, description: str | None = None) -> argparse.ArgumentParser:
    """A subcommand whose `--help` says what it does and shows `example` (examples may be several lines)."""
    return sub.add_parser(
        name, help=help, description=description or help[:1].upper() + help[1:] + ".",
        epilog="example: " + example, formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def workflow_id(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("workflow_id", help="the run's workflow id")
