"""`ratchet serve`: the HTTP server for browsers and other languages (ratchet/serve/app.py)."""

from __future__ import annotations

import argparse
import asyncio

READY = "ratchet serve on"


def serve(args: argparse.Namespace) -> int:
    from ratchet.ops.http_guard import GuardSettingsError, HttpGuard, is_loopback
    from ratchet.ops.people_settings import load_people_settings
    from ratchet.ops.settings import load_settings
    from ratchet.people.setup import authenticator
    from ratchet.serve.app import TOKEN_SETTING

    settings, people_settings = load_settings(), load_people_settings()
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
        guard = HttpGuard.for_server(
            args.host, origins, hosts, token, TOKEN_SETTING, signs_in=bool(people_settings.proxy_networks)
        )
    except GuardSettingsError as exc:
        print(f"ratchet serve: {exc}")
        return 2
    people = authenticator(people_settings, token, settings.ledger_store_url, is_loopback(args.host), settings.roles)
    return asyncio.run(_serve(settings, guard, args.host, args.port, hooks, people))


async def _serve(settings, guard, host: str, port: int, hooks, people) -> int:
    from ratchet.cli.http_app import serve_app
    from ratchet.client import RatchetClient
    from ratchet.serve.app import build_app

    client = await RatchetClient.connect(settings)
    return await serve_app(
        build_app(client, guard, hooks=hooks, people=people),
        host,
        port,
        lambda url: f"{READY} {url} (GET /runs/ID/events, POST /agui" + (", POST /hooks/NAME)" if hooks else ")"),
    )
