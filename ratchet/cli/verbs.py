"""One way to declare a `ratchet` verb (a one-line help, a description and an example), and to run
one against Ratchet's client."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ratchet.client import RatchetClient


def verb(sub, name: str, help: str, example: str, description: str | None = None) -> argparse.ArgumentParser:
    """A subcommand whose `--help` says what it does and shows `example` (examples may be several lines)."""
    cmd = sub.add_parser(
        name,
        help=help,
        description=description or help[:1].upper() + help[1:] + ".",
        epilog="example: " + example,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,  # `--max-step 3` is a typo, not `--max-steps 3`
    )
    cmd.set_defaults(verb_parser=cmd)  # its own usage line for an argument it does not know (main)
    return cmd


def workflow_id(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("workflow_id", help="the run's workflow id")


async def connected() -> RatchetClient:
    """The client of the run verbs, from the environment's settings (TEMPORAL_*, RATCHET_*)."""
    from ratchet.client import RatchetClient

    return await RatchetClient.connect()


def run_verb(fn: Callable[[argparse.Namespace], Coroutine[Any, Any, int]]) -> Callable[[argparse.Namespace], int]:
    """`fn` as a verb: a RatchetError it did not handle is one line on stderr: a refusal (a closed
    run: `ops-8 has ended DONE (COMPLETED): it takes no messages`) exit status 1, no such run and
    the like 2, EXIT_UNREACHABLE when Temporal (or a worker) did not answer."""
    from ratchet.client import RatchetError, Refused, Unavailable
    from ratchet.ops.connection import EXIT_UNREACHABLE

    def run(args: argparse.Namespace) -> int:
        try:
            return asyncio.run(fn(args))
        except Refused as exc:
            print(exc, file=sys.stderr)
            return 1
        except RatchetError as exc:
            print(f"ratchet: {exc}", file=sys.stderr)
            return EXIT_UNREACHABLE if isinstance(exc, Unavailable) else 2

    return run
