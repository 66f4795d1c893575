"""The `ratchet` command."""

from __future__ import annotations

import argparse
import sys

from ratchet.cli.table import VERBS
from ratchet.ops.process import exit_now, exit_on_closed_pipe

EXIT_STATUSES = """exit status:
  0   done (the run ended DONE, the request was taken)
  1   the run failed or ended otherwise, or it refused the request (it says why)
  2   a usage or input error, or no such run
  3   `result --no-wait`: the run is still running
  69  Temporal cannot be reached (or no worker answered): the message names the address"""


def parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The `ratchet` parser: every verb with its one-line help, and the arguments of the verb `argv`
    names (its first word) only, so that nothing else is imported; `argv` None: every verb's
    arguments (tests and docs read them all)."""
    root = argparse.ArgumentParser(
        prog="ratchet",
        description="Durable LLM agents on Temporal.",
        epilog=EXIT_STATUSES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    sub = root.add_subparsers(dest="command", required=True)
    for verb in VERBS:
        cmd = verb.parser(sub)
        if argv is None or argv[:1] == [verb.name]:
            verb.arguments(cmd)
    return root


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    args, unknown = parser(argv).parse_known_args(argv)
    if isinstance(getattr(args, "words", None), list):  # trailing words after options (see `trailing_words`)
        args.words += [word for word in unknown if not word.startswith("-")]
        unknown = [word for word in unknown if word.startswith("-")]
    if unknown:  # said under the verb's usage line, not the root's list of every verb
        args.verb_parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    run = next(verb for verb in VERBS if verb.name == args.command).handler()
    try:
        status = run(args)
        sys.stdout.flush()  # what is still buffered: a reader that went away shows here
    except BrokenPipeError:  # `ratchet list | head -1`: end as a Unix tool does, no traceback
        exit_on_closed_pipe()
    except KeyboardInterrupt:
        status = 130
    except Exception as exc:
        status = _one_line(exc)
    exit_now(status)


def _one_line(exc: Exception) -> int:
    """The exit status of an error a verb did not handle that is one line for its user (re-raised
    otherwise): a setting that cannot work (any verb: the message names it), a missing codec key
    (any verb that reads a run's payloads), Temporal unreachable (a verb that connects outside
    `run_verb`: serve, console, replay --server). Their modules are imported here, on the way out,
    not by every verb's start."""
    from ratchet.core.settings_errors import SettingsError
    from ratchet.ops.connection import EXIT_UNREACHABLE, TemporalUnreachable
    from ratchet.payloads.codec import CodecKeyError

    if isinstance(exc, (SettingsError, CodecKeyError)):
        status = 2
    elif isinstance(exc, TemporalUnreachable):
        status = EXIT_UNREACHABLE
    else:
        raise exc
    print(f"ratchet: {exc}", file=sys.stderr, flush=True)
    return status


if __name__ == "__main__":
    main()
