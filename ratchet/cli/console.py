"""`ratchet console`: the web app for the people around an agent (ratchet/console/app.py)."""

from __future__ import annotations

import argparse
import asyncio

READY = "ratchet console on"


def console(args: argparse.Namespace) -> int:
    from ratchet.cli.table import CONSOLE_TOKEN_SETTING
    from ratchet.console.guard import ConsoleGuard
    from ratchet.console.signin import OidcSignIn
    from ratchet.ops.http_guard import GuardSettingsError, HttpGuard, is_loopback
    from ratchet.ops.people_settings import load_people_settings
    from ratchet.ops.settings import load_settings
    from ratchet.people.setup import authenticator, oidc_client

    settings, people = load_settings(), load_people_settings()
    secret = settings.console_token or settings.serve_token
    token = secret.get_secret_value() if secret else None
    hosts = [h for h in args.allowed_host.split(",") if h.strip()]
    signs_in = people.oidc or bool(people.proxy_networks)
    try:
        http = HttpGuard.for_server(
            args.host, (), hosts, token, CONSOLE_TOKEN_SETTING + ", RATCHET_OIDC_ISSUER", True, signs_in
        )
    except GuardSettingsError as exc:
        print(f"ratchet console: {exc}")
        return 2
    client = oidc_client(people)
    guard = ConsoleGuard(
        http,
        people=authenticator(people, token, settings.ledger_store_url, is_loopback(args.host)),
        oidc=OidcSignIn(client, people.oidc_roles_claim, people.public_url) if client else None,
    )
    return asyncio.run(_serve(settings, guard, args.host, args.port))


async def _serve(settings, guard, host: str, port: int) -> int:
    from ratchet.cli.http_app import serve_app
    from ratchet.client import RatchetClient
    from ratchet.console.app import build_app

    client = await RatchetClient.connect(settings)
    return await serve_app(build_app(client, guard.http, guard), host, port, lambda url: f"{READY} {url}/")
