"""`ratchet serve`: the HTTP server for browsers and other languages (ratchet/serve/app.py)."""

from __future__ import annotations

import argparse
import asyncio

from ratchet.cli.verbs import verb

READY = "ratchet serve on"


def serve(args: argparse.Namespace) -> int:
    from ratchet.ops.http_guard import GuardSettingsError, HttpGuard
    from ratchet.ops.settings import load_settings
    from ratchet.serve.app import TOKEN_SETTING

    settings = load_settings()
    token = settings.serve_token.get_secret_value() if settings.serve_token else None
    origins = [o for o in args.cors_origin.split(",") if o.strip()]
    hosts = [h for h in args.allowed_host.split(",") if h.strip()]
    try:
        guard = HttpGuard.for_server(args.host, origins, hosts, token, TOKEN_SETTING)
    except GuardSettingsError as exc:
        print(f"ratchet serve: {exc}")
        return 2
    return asyncio.run(_serve(settings, guard, args.host, args.port))


async def _serve(settings, guard, host: str, port: int) -> int:
    from ratchet.cli.http_app import serve_app
    from ratchet.client import RatchetClient
    from ratchet.serve.app import build_app

    client = await RatchetClient.connect(settings)
    return await serve_app(
        build_app(client, guard), host, port, lambda url: f"{READY} {url} (GET /runs/ID/events, POST /agui)"
    )


def register(sub) -> None:
    cmd = verb(
        sub,
        "serve",
        "serve runs over HTTP: Server-Sent Events per run, and AG-UI for front ends",
        "ratchet serve --port 8765\n         curl -N localhost:8765/runs/ops-7/events",
        description="GET /runs/ID/events streams a run's events as Server-Sent Events (resume with Last-Event-ID); "
        "POST /agui takes an AG-UI RunAgentInput (starts the thread's run or sends it a message) and answers "
        "with the run as AG-UI events. Loopback by default; any other address needs RATCHET_SERVE_TOKEN.",
    )
    cmd.add_argument("--port", type=int, default=8765, help="default: %(default)s (0: any free port)")
    cmd.add_argument("--host", default="127.0.0.1", help="default: %(default)s")
    cmd.add_argument("--cors-origin", default="", help="browser origins that may call it, comma-separated")
    cmd.add_argument(
        "--allowed-host", default="", help="host names it answers for besides the loopback names and --host"
    )
    cmd.set_defaults(fn=serve)
