"""Signing into `ratchet console` in a real browser through a real OpenID provider: headless Chromium
(Playwright for Python, the system's /usr/bin/chromium) against the console served by uvicorn, npm's
oidc-provider under node (tests/oidc_provider.py), the dev server and a real worker with the
scripted model. `make test-browser` runs it (the `browser` extra); `make test` skips it."""

from __future__ import annotations

import asyncio
import uuid

import pytest
import uvicorn

from devtools.devserver import free_port
from ratchet.client import RatchetClient
from ratchet.console.app import build_app
from ratchet.console.guard import ConsoleGuard
from ratchet.console.signin import CALLBACK, OidcSignIn
from ratchet.contracts import Phase
from ratchet.ops.http_guard import HttpGuard
from ratchet.people.authenticate import Authenticator
from ratchet.people.oidc import OidcClient
from tests.oidc_provider import OidcProvider
from tests.runs import call, until, wait_for
from tests.surfaces.test_console_browser import browser, page  # noqa: F401  (the Chromium fixtures)

playwright = pytest.importorskip("playwright.async_api", reason="the `browser` extra: make test-browser")
pytestmark = pytest.mark.browser


@pytest.fixture
async def signed_console(client, settings):
    """The console on a free port of 127.0.0.1 with sign-in through a fresh oidc-provider: its URL."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    web = {"client_id": "console", "client_secret": "browser-secret", "redirect_uris": [base + CALLBACK],
           "grant_types": ["authorization_code"], "response_types": ["code"]}
    with OidcProvider(clients=[web], accounts={"alice": {"name": "Alice", "groups": ["approver"]}}) as idp:
        http = HttpGuard.for_server("127.0.0.1", same_origin=True)
        oidc = OidcSignIn(OidcClient(idp.issuer, "console", "browser-secret", "openid profile groups"), "groups")
        guard = ConsoleGuard(http, people=Authenticator(), oidc=oidc)
        app = build_app(RatchetClient(client, settings), http, guard)
        server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                                               timeout_graceful_shutdown=1))
        serving = asyncio.create_task(server.serve())
        await until(lambda: server.started, "the console listening")
        yield base
        server.should_exit = True
        await serving


async def test_a_person_signs_in_through_the_provider_sees_their_name_and_approves_as_themselves(
    client, settings, worker, signed_console, page  # noqa: F811
):
    script = [{"tool_calls": [call("create_ticket", title="prod signed")]}, {"content": "opened signed"}]
    run = await RatchetClient(client, settings).start(
        {"agent": "ops", "objective": "open signed", "model": {"provider": "scripted", "options": {"script": script}}},
        f"signin-browser-{uuid.uuid4().hex[:6]}",
    )
    state = await wait_for(run, lambda s: s.calls.pending_approvals)
    call_id = state.calls.pending_approvals[0].call_id

    await page.goto(f"{signed_console}/runs/{run.workflow_id}")  # nobody signed in: the sign-in page
    await playwright.expect(page.locator("h1")).to_have_text("Sign in")
    await page.get_by_role("link", name="Sign in with your organisation's account").click()
    await page.locator("input[name=login]").fill("alice")  # the provider's own page
    await page.locator("input[name=password]").fill("anything")
    await page.get_by_role("button", name="Sign-in").click()
    await page.get_by_role("button", name="Continue").click()  # its consent page
    await playwright.expect(page.locator("#signed-in")).to_have_text("alice")  # back on the run's page
    assert page.url == f"{signed_console}/runs/{run.workflow_id}"
    await page.get_by_role("button", name="Approve").first.click()
    await playwright.expect(page.locator(".flash.ok")).to_contain_text(f"Approved {call_id}")
    result = await run.result()
    assert result.phase == Phase.DONE
    assert (await run.state()).calls.decisions[call_id].by == "alice"

    await page.get_by_role("button", name="Sign out").click()
    await playwright.expect(page.locator("h1")).to_have_text("Sign in")
    await page.goto(f"{signed_console}/inbox")
    await playwright.expect(page.locator("h1")).to_have_text("Sign in")
