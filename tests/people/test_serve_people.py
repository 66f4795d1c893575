"""`ratchet serve` knows who calls (ratchet/serve/app.py over ratchet/people/authenticate.py): a
person's token, the single token, a trusted proxy's header; anyone else is 401 before the handler.
The app in-process (httpx over ASGI) on the dev server; tokens in a real SQLite ledger file."""

from __future__ import annotations

import httpx2 as httpx

from ratchet.client import RatchetClient
from ratchet.ops.http_guard import HttpGuard
from ratchet.ops.people_settings import networks
from ratchet.people.authenticate import Authenticator
from ratchet.serve.app import build_app
from ratchet.stores.users import open_users

EVENTS = "/runs/no-such-run-here/events"


def served(client, settings, people: Authenticator, address: str = "127.0.0.1") -> httpx.AsyncClient:
    app = build_app(RatchetClient(client, settings), HttpGuard.for_server("127.0.0.1"), people=people)
    transport = httpx.ASGITransport(app=app, client=(address, 50000))
    return httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1", timeout=30)


async def test_serve_takes_a_persons_token_until_they_are_removed_and_a_proxy_only_from_its_address(
    client, settings, tmp_path
):
    users = open_users(f"sqlite:///{tmp_path}/ledger.sqlite3")
    token = users.add("dora", ["approver"])
    people = Authenticator(console_token="shared", users=users, proxies=tuple(networks("10.9.9.9/32")))
    proxy = {"X-Forwarded-Email": "erin@example.com", "X-Forwarded-Groups": "ops"}
    async with served(client, settings, people) as http:
        assert (await http.get(EVENTS)).status_code == 401
        assert (await http.get(EVENTS, headers={"Authorization": "Bearer guess"})).status_code == 401
        assert (await http.get(EVENTS, headers={"Authorization": f"Bearer {token}"})).status_code == 404  # past the door
        assert (await http.get(EVENTS, headers={"Authorization": "Bearer shared"})).status_code == 404
        assert (await http.get(EVENTS, headers=proxy)).status_code == 401  # not from the proxy's address
        users.remove("dora")
        assert (await http.get(EVENTS, headers={"Authorization": f"Bearer {token}"})).status_code == 401
    async with served(client, settings, people, address="10.9.9.9") as via_proxy:
        assert (await via_proxy.get(EVENTS, headers=proxy)).status_code == 404


async def test_serve_on_loopback_without_a_token_is_the_single_user(client, settings):
    async with served(client, settings, Authenticator(single_user=True)) as http:
        assert (await http.get(EVENTS)).status_code == 404
