"""`ratchet console`: the web app for the people around an agent (ratchet/console/app.py)."""

from __future__ import annotations

import argparse
import asyncio

READY = "ratchet console on"


def console(args: argparse.Namespace) -> int:
    from ratchet.ops.http_guard import GuardSettingsError
    from ratchet.ops.people_settings import load_people_settings
    from ratchet.ops.settings import load_settings

    settings = load_settings()
    hosts = [h for h in args.allowed_host.split(",") if h.strip()]
    try:
        guard = console_guard(settings, load_people_settings(), args.host, hosts)
    except GuardSettingsError as exc:
        print(f"ratchet console: {exc}")
        return 2
    return asyncio.run(_serve(settings, guard, args.host, args.port))


def console_guard(settings, people, host: str, hosts: list[str]):
    """The console's guard for `settings` and the sign-in settings `people` on `host`: its token
    (RATCHET_CONSOLE_TOKEN, else RATCHET_SERVE_TOKEN), the users table of the ledger's database, the
    OpenID provider and trusted proxies. GuardSettingsError: beyond loopback with no way to sign in."""
    from ratchet.cli.table import CONSOLE_TOKEN_SETTING
    from ratchet.console.guard import ConsoleGuard
    from ratchet.console.signin import OidcSignIn
    from ratchet.ops.http_guard import HttpGuard, is_loopback
    from ratchet.people.setup import authenticator, oidc_client

    secret = settings.console_token or settings.serve_token
    token = secret.get_secret_value() if secret else None
    signs_in = people.oidc or bool(people.proxy_networks)
    setting = CONSOLE_TOKEN_SETTING + ", RATCHET_OIDC_ISSUER or RATCHET_TRUSTED_PROXIES"
    http = HttpGuard.for_server(host, (), hosts, token, setting, same_origin=True, signs_in=signs_in)
    client = oidc_client(people)
    return ConsoleGuard(
        http,
        people=authenticator(people, token, settings.ledger_store_url, is_loopback(host), settings.roles),
        oidc=OidcSignIn(client, people.oidc_roles_claim, people.public_url) if client else None,
    )


async def _serve(settings, guard, host: str, port: int) -> int:
    from ratchet.cli.http_app import serve_app
    from ratchet.client import RatchetClient
    from ratchet.console.app import build_app

    client = await RatchetClient.connect(settings)
    return await serve_app(build_app(client, guard.http, guard), host, port, lambda url: f"{READY} {url}/")
