"""The `ratchet` command."""

from __future__ import annotations

import argparse
import json
import sys

from ratchet.cli.verbs import verb
from ratchet.ops.process import exit_now, exit_on_closed_pipe

EXIT_STATUSES = """exit status:
  0   done (the run ended DONE, the request was taken)
  1   the run failed or ended otherwise, or it refused the request (it says why)
  2   a usage or input error, or no such run
  3   `result --no-wait`: the run is still running
  69  Temporal cannot be reached (or no worker answered): the message names the address"""


def _worker(args: argparse.Namespace) -> int:
    from ratchet.worker.main import main as worker_main

    worker_main()
    return 0


def _config(args: argparse.Namespace) -> int:
    from ratchet.models.builtin import provider_settings
    from ratchet.ops.settings import SettingsError, load_settings

    try:
        shown = load_settings().masked()  # with the effective Temporal connection
        shown["providers"] = {name: found.masked() for name, found in provider_settings().items()}
    except SettingsError as exc:
        print(f"ratchet: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(shown, indent=2))
    if shown.get("sandbox") == "off":
        from ratchet.sandbox.choose import UNCONFINED_WARNING

        print(f"ratchet: WARNING: {UNCONFINED_WARNING}", file=sys.stderr)
    return 0


def _codec_server(args: argparse.Namespace) -> int:
    from ratchet.payloads.codec_server import main as codec_server_main

    return codec_server_main(args)


def _replay(args: argparse.Namespace) -> int:
    from ratchet.replay.gate import main as replay_main

    return replay_main(args)


def _health(args: argparse.Namespace) -> int:
    from ratchet.cli.health import main as health_main

    return health_main(args)


def _mcp(args: argparse.Namespace) -> int:
    from ratchet.cli.mcp_server import main as mcp_main

    return mcp_main(args)


def _migrate_stores(args: argparse.Namespace) -> int:
    from ratchet.stores.migrate import main as migrate_main

    return migrate_main(args)


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(
        prog="ratchet",
        description="Durable LLM agents on Temporal.",
        epilog=EXIT_STATUSES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    sub = root.add_subparsers(dest="command", required=True)
    verb(
        sub,
        "worker",
        "run a worker (settings from the environment, `ratchet config` shows them)",
        "RATCHET_PLUGINS=myteam.tools ratchet worker",
    ).set_defaults(fn=_worker)
    verb(
        sub,
        "config",
        "print the effective settings as JSON, secrets masked",
        "RATCHET_LEDGER_URL=postgresql://... ratchet config",
    ).set_defaults(fn=_config)
    codec = verb(
        sub,
        "codec-server",
        "decrypt payloads for the Web UI and `temporal --codec-endpoint`",
        "RATCHET_CODEC_KEYS=k1:... ratchet codec-server --port 8081",
    )
    codec.add_argument("--port", type=int, default=8081, help="default: %(default)s")
    codec.add_argument("--host", default="127.0.0.1", help="default: %(default)s")
    codec.add_argument("--cors-origin", default="http://localhost:8080", help="Web UI origin(s), comma-separated")
    codec.add_argument(
        "--allowed-host",
        default="",
        help="host names it answers for besides the loopback names and --host, comma-separated",
    )
    codec.add_argument(
        "--encode",
        action="store_true",
        help="answer /encode too (for `temporal workflow start --codec-endpoint`); off: anyone "
        "who reaches it could seal inputs with the workers' key",
    )
    codec.set_defaults(fn=_codec_server)
    from ratchet.replay.gate import add_arguments as replay_arguments

    replay = verb(
        sub,
        "replay",
        "replay histories against today's workflow code (the deploy gate)",
        "ratchet replay tests/histories\n"
        "         ratchet replay --server --query 'ExecutionStatus=\"Running\"' --min 0",
    )
    replay_arguments(replay)
    replay.set_defaults(fn=_replay)
    from ratchet.cli.health import add_arguments as health_arguments

    health = verb(
        sub,
        "health",
        "check that Temporal, the ledger and the artifact store answer (exit 0/1)",
        "ratchet health --timeout 3",
        description="Connect to what a worker needs, with the worker's settings, one line per check; "
        "exit 0 if every check passes, else 1. The compose worker's healthcheck.",
    )
    health_arguments(health)
    health.set_defaults(fn=_health)
    from ratchet.stores.migrate import add_arguments as migrate_arguments

    migrate = verb(
        sub,
        "migrate-stores",
        "copy the ledger and artifacts into other stores (Postgres, S3)",
        "ratchet migrate-stores --to-ledger postgresql://... --to-artifacts s3://bucket/ratchet --dry-run",
    )
    migrate_arguments(migrate)
    migrate.set_defaults(fn=_migrate_stores)
    mcp = verb(
        sub,
        "mcp",
        "serve run control over MCP (stdio, or streamable HTTP with --port) to an assistant or IDE",
        "ratchet mcp\n         ratchet mcp --port 8765",
    )
    mcp.add_argument("--port", type=int, help="serve streamable HTTP on this port instead of stdio")
    mcp.add_argument("--host", default="127.0.0.1", help="with --port (default: %(default)s)")
    mcp.set_defaults(fn=_mcp)
    from ratchet.cli.runs import register as register_run_commands

    register_run_commands(sub)
    from ratchet.cli.basics import register as register_basics

    register_basics(sub)
    from ratchet.cli.serve import register as register_serve

    register_serve(sub)
    from ratchet.cli.console import register as register_console

    register_console(sub)
    from ratchet.cli.offer import register as register_offer

    register_offer(sub)
    from ratchet.cli.chat import register_chat

    register_chat(sub)
    return root


def main(argv: list[str] | None = None) -> None:
    from ratchet.payloads.codec import CodecKeyError

    args, unknown = parser().parse_known_args(argv)
    if unknown:  # said under the verb's usage line, not the root's list of every verb
        args.verb_parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    try:
        status = args.fn(args)
        sys.stdout.flush()  # what is still buffered: a reader that went away shows here
    except BrokenPipeError:  # `ratchet list | head -1`: end as a Unix tool does, no traceback
        exit_on_closed_pipe()
    except KeyboardInterrupt:
        status = 130
    except CodecKeyError as exc:  # any verb that reads a run's payloads: which key or setting is missing
        print(f"ratchet: {exc}", file=sys.stderr, flush=True)
        status = 2
    except Exception as exc:  # a verb that connects outside `run_verb` (serve, console, replay --server)
        from ratchet.ops.connection import EXIT_UNREACHABLE, TemporalUnreachable

        if not isinstance(exc, TemporalUnreachable):
            raise
        print(f"ratchet: {exc}", file=sys.stderr, flush=True)
        status = EXIT_UNREACHABLE
    exit_now(status)


if __name__ == "__main__":
    main()
