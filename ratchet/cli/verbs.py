"""One way to declare a `ratchet` verb (`Verb`: a one-line help, an example, the arguments it takes
and the function that runs it), and to run one against Ratchet's client.

Declaring a verb imports nothing of what runs it: `ratchet --help` and a verb's parse stay cheap
(no temporalio, pydantic or openai), and a verb's module is imported only when that verb runs."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from ratchet.client import RatchetClient


def no_arguments(cmd: argparse.ArgumentParser) -> None:
    """A verb that takes no arguments of its own."""


class Verb(NamedTuple):
    """A `ratchet` verb, declared without importing what runs it."""

    name: str
    help: str
    """One line, in `ratchet --help`'s list; the description too unless `description` is given."""
    example: str
    """Shown under the verb's `--help`; examples may be several lines."""
    run: str
    """`module:function` taking the parsed arguments and returning the exit status, imported only
    when the verb runs; an `async` function runs under `run_verb`."""
    arguments: Callable[[argparse.ArgumentParser], None] = no_arguments
    """Adds the verb's arguments; called only for the verb the command line names."""
    description: str | None = None

    def parser(self, sub) -> argparse.ArgumentParser:
        """The verb's parser among `sub` (a subparsers action), without its arguments; its `--help`
        says what it does and shows the example."""
        cmd = sub.add_parser(
            self.name,
            help=self.help,
            description=self.description or self.help[:1].upper() + self.help[1:] + ".",
            epilog="example: " + self.example,
            formatter_class=argparse.RawDescriptionHelpFormatter,
            allow_abbrev=False,  # `--max-step 3` is a typo, not `--max-steps 3`
        )
        cmd.set_defaults(verb_parser=cmd)  # its own usage line for an argument it does not know (main)
        return cmd

    def handler(self) -> Callable[[argparse.Namespace], int]:
        """The function that runs the verb (its module imported now)."""
        import inspect

        module, _, name = self.run.partition(":")
        fn = getattr(importlib.import_module(module), name)
        return run_verb(fn) if inspect.iscoroutinefunction(fn) else fn


def seconds(text: str) -> float:
    """`30m`, `2h`, `90s`, `1d`, `1800`: seconds (ValueError saying what is wrong)."""
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    number, unit = (text[:-1], units[text[-1]]) if text[-1:] in units else (text, 1)
    try:
        value = float(number) * unit
    except ValueError:
        raise ValueError(f"{text!r} is not a duration (30m, 2h, 90s, or seconds)") from None
    if value <= 0:
        raise ValueError(f"{text!r}: a duration must be positive")
    return value


def trailing_words(cmd: argparse.ArgumentParser, metavar: str, help: str) -> None:
    """Positional words that may also come after the options (`schedule create NAME --cron C coder
    'triage'`): Python 3.11's argparse matches an optional positional where the first words end and
    calls the later ones unrecognized, so `main` adds those (not the unknown options) to `args.words`."""
    cmd.add_argument("words", nargs="*", metavar=metavar, help=help)


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
    import asyncio

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
