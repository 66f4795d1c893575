"""`ratchet console`: the web app for the people around an agent (ratchet/console/app.py)."""

from __future__ import annotations

import argparse
import asyncio

from ratchet.cli.verbs import verb

READY = "ratchet console on"
TOKEN_SETTING = "RATCHET_CONSOLE_TOKEN (or RATCHET_SERVE_TOKEN)"


def console(args: argparse.Namespace) -> int:
    from ratchet.ops.http_guard import GuardSettingsError, HttpGuard
    from ratchet.ops.settings import load_settings

    settings = load_settings()
    secret = settings.console_token or settings.serve_token
    token = secret.get_secret_value() if secret else None
    hosts = [h for h in args.allowed_host.split(",") if h.strip()]
    try:
        guard = HttpGuard.for_server(args.host, (), hosts, token, TOKEN_SETTING, same_origin=True)
    except GuardSettingsError as exc:
        print(f"ratchet console: {exc}")
        return 2
    return asyncio.run(_serve(settings, guard, args.host, args.port))


async def _serve(settings, guard, host: str, port: int) -> int:
    from ratchet.cli.http_app import serve_app
    from ratchet.client import RatchetClient
    from ratchet.console.app import build_app

    client = await RatchetClient.connect(settings)
    return await serve_app(build_app(client, guard), host, port, lambda url: f"{READY} {url}/")


def register(sub) -> None:
    cmd = verb(
        sub,
        "console",
        "a web console for the people around an agent: runs, approvals, checkpoints, rollback",
        "ratchet console --port 8780   # then open http://127.0.0.1:8780/",
        description="Serves server-rendered pages over ratchet.client: runs (filtered, paged), a run (state, "
        "conversation, live tokens, effects, checkpoints with evidence and patch, rollback plan then confirm), "
        "an inbox of pending approvals and decisions, a start form. Every action is a POST with a CSRF token. "
        f"Loopback by default; any other address needs {TOKEN_SETTING} (a sign-in page asks for it).",
    )
    cmd.add_argument("--port", type=int, default=8780, help="default: %(default)s (0: any free port)")
    cmd.add_argument("--host", default="127.0.0.1", help="default: %(default)s")
    cmd.add_argument(
        "--allowed-host", default="", help="host names it answers for besides the loopback names and --host"
    )
    cmd.set_defaults(fn=console)
