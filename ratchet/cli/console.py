"""`ratchet console`: the web app for the people around an agent (ratchet/console/app.py)."""

from __future__ import annotations

import argparse
import asyncio

READY = "ratchet console on"


def console(args: argparse.Namespace) -> int:
    from ratchet.cli.table import CONSOLE_TOKEN_SETTING
    from ratchet.ops.http_guard import GuardSettingsError, HttpGuard
    from ratchet.ops.settings import load_settings

    settings = load_settings()
    secret = settings.console_token or settings.serve_token
    token = secret.get_secret_value() if secret else None
    hosts = [h for h in args.allowed_host.split(",") if h.strip()]
    try:
        guard = HttpGuard.for_server(args.host, (), hosts, token, CONSOLE_TOKEN_SETTING, same_origin=True)
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
