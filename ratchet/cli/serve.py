"""`ratchet serve`: the HTTP server for browsers and other languages (ratchet/serve/app.py)."""

from __future__ import annotations

import argparse
import asyncio

READY = "ratchet serve on"


def serve(args: argparse.Namespace) -> int:
    from ratchet.ops.http_guard import GuardSettingsError, HttpGuard
    from ratchet.ops.settings import load_settings
    from ratchet.serve.app import TOKEN_SETTING

    settings = load_settings()
    hooks = {}
    if settings.hooks is not None:
        from ratchet.serve.hooks import load_hooks

        try:
            hooks = load_hooks(settings.hooks)
        except ValueError as exc:
            print(f"ratchet serve: {exc}")
            return 2
    token = settings.serve_token.get_secret_value() if settings.serve_token else None
    origins = [o for o in args.cors_origin.split(",") if o.strip()]
    hosts = [h for h in args.allowed_host.split(",") if h.strip()]
    try:
        guard = HttpGuard.for_server(args.host, origins, hosts, token, TOKEN_SETTING)
    except GuardSettingsError as exc:
        print(f"ratchet serve: {exc}")
        return 2
    return asyncio.run(_serve(settings, guard, args.host, args.port, hooks))


async def _serve(settings, guard, host: str, port: int, hooks) -> int:
    from ratchet.cli.http_app import serve_app
    from ratchet.client import RatchetClient
    from ratchet.serve.app import build_app

    client = await RatchetClient.connect(settings)
    return await serve_app(
        build_app(client, guard, hooks=hooks),
        host,
        port,
        lambda url: f"{READY} {url} (GET /runs/ID/events, POST /agui" + (", POST /hooks/NAME)" if hooks else ")"),
    )
