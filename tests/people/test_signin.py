"""Sign-in on the real path, without a browser: the console's app in-process (httpx over ASGI) on the
dev server, a real OpenID provider (npm's oidc-provider under node, tests/oidc_provider.py) whose
login and consent pages are walked with plain HTTP, people's tokens in a real SQLite ledger file.
The same sign-in in Chromium: tests/people/test_signin_browser.py (`make test-browser`)."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

import httpx2 as httpx
import pytest
from joserfc import jwt
from joserfc.jwk import RSAKey

from ratchet.client import RatchetClient
from ratchet.console.app import build_app
from ratchet.console.guard import ConsoleGuard
from ratchet.console.signin import CALLBACK, OidcSignIn
from ratchet.ops.http_guard import HttpGuard
from ratchet.ops.people_settings import networks
from ratchet.people.authenticate import Authenticator
from ratchet.people.oidc import OidcClient, SignInRefused
from ratchet.people.sessions import SESSION_COOKIE
from ratchet.stores.users import open_users
from tests.oidc_provider import OidcProvider, sign_in

ORIGIN = "http://127.0.0.1"
REDIRECT = ORIGIN + CALLBACK
SECRET = "console-client-secret"
ALICE = {"name": "Alice Example", "email": "alice@example.com", "groups": ["approver", "ops"]}


@pytest.fixture(scope="module")
def idp():
    web = {"grant_types": ["authorization_code"], "response_types": ["code"], "redirect_uris": [REDIRECT]}
    clients = [{"client_id": "console", "client_secret": SECRET, **web},
               {"client_id": "other-app", "client_secret": "other-secret", **web}]
    with OidcProvider(clients=clients, accounts={"alice": ALICE}) as provider:
        yield provider


def oidc(idp: OidcProvider, client_id: str = "console", secret: str = SECRET, **kw) -> OidcClient:
    return OidcClient(idp.issuer, client_id, secret, "openid profile email groups", **kw)


async def id_token(client: OidcClient, login: str = "alice") -> tuple[str, str]:
    """A real ID token from the provider for `client` (signed in as `login`), and its sign-in's nonce."""
    flow = await client.start(REDIRECT)
    back = parse_qs(urlsplit(await sign_in(flow.url, login, REDIRECT)).query)
    return await client.exchange(back["code"][0], flow.verifier, REDIRECT), flow.nonce


def console_app(client, settings, people: Authenticator, idp: OidcProvider | None = None, address: str = "127.0.0.1"):
    http = HttpGuard.for_server("127.0.0.1", same_origin=True)
    sign = OidcSignIn(oidc(idp), "groups") if idp else None
    app = build_app(RatchetClient(client, settings), http, ConsoleGuard(http, people=people, oidc=sign))
    transport = httpx.ASGITransport(app=app, client=(address, 40000))
    return httpx.AsyncClient(transport=transport, base_url=ORIGIN, timeout=60)


async def test_a_person_signs_in_through_the_provider_and_every_page_names_them(client, settings, idp):
    people = Authenticator()
    async with console_app(client, settings, people, idp) as console:
        assert (await console.get("/")).status_code == 401
        browsing = await console.get("/inbox", headers={"Accept": "text/html"})
        assert browsing.status_code == 303 and browsing.headers["location"] == "/login?next=%2Finbox"
        assert '"/auth/login?next=%2Finbox"' in (await console.get(browsing.headers["location"])).text
        start = await console.get("/auth/login", params={"next": "/inbox"})
        assert start.status_code == 302 and start.headers["location"].startswith(idp.issuer)
        asked = parse_qs(urlsplit(start.headers["location"]).query)
        assert asked["code_challenge_method"] == ["S256"] and asked["nonce"] and asked["state"]
        back = await sign_in(start.headers["location"], "alice", REDIRECT)
        done = await console.get(back.removeprefix(ORIGIN))
        assert done.status_code == 303 and done.headers["location"] == "/inbox"
        cookie = next(c for c in done.headers.get_list("set-cookie") if c.startswith(SESSION_COOKIE))
        assert "HttpOnly" in cookie and "SameSite=lax" in cookie
        page = await console.get("/inbox")
        assert page.status_code == 200 and re.search(r"signed in as <b id=signed-in>alice</b> \(oidc\)", page.text)
        session = console.cookies[SESSION_COOKIE]
        async with console_app(client, settings, people, idp) as other:  # the same console, another cookie jar
            other.cookies.set(SESSION_COOKIE, session)
            assert (await other.get("/inbox")).status_code == 200
            other.cookies.set(SESSION_COOKIE, session[:5] + ("A" if session[5] != "A" else "B") + session[6:])
            assert (await other.get("/inbox")).status_code == 401  # a changed session is nobody's
        csrf = re.search(r'action="/logout"><input type=hidden name=csrf value="([0-9a-f]+)"', page.text).group(1)
        assert (await console.post("/logout", data={"csrf": csrf})).status_code == 303
        assert (await console.get("/inbox")).status_code == 401


async def test_an_answer_for_another_sign_in_is_refused(client, settings, idp):
    async with console_app(client, settings, Authenticator(), idp) as console:
        start = await console.get("/auth/login")
        back = await sign_in(start.headers["location"], "alice", REDIRECT)
        forged = re.sub(r"state=[^&]+", "state=someone-elses", back).removeprefix(ORIGIN)
        refused = await console.get(forged)
        assert refused.status_code == 400 and "(state)" in refused.text
        mixed_up = re.sub(r"iss=[^&]+", "iss=https%3A%2F%2Fother-idp.example", back).removeprefix(ORIGIN)
        refused = await console.get(mixed_up)
        assert refused.status_code == 400 and "not this console&#x27;s provider" in refused.text
        assert SESSION_COOKIE not in refused.headers.get("set-cookie", "")
        assert (await console.get("/")).status_code == 401
    async with console_app(client, settings, Authenticator(), idp) as other_browser:  # no sign-in of its own
        refused = await other_browser.get(back.removeprefix(ORIGIN))
        assert refused.status_code == 400 and "No sign-in is in progress" in refused.text


async def test_the_id_token_of_a_real_sign_in_verifies_and_its_roles_are_the_groups_claim(idp):
    client = oidc(idp)
    token, nonce = await id_token(client)
    claims = await client.verify(token, nonce)
    assert claims["sub"] == "alice" and claims["aud"] == "console" and claims["groups"] == ["approver", "ops"]


async def test_a_token_for_another_audience_an_expired_one_and_a_wrong_nonce_are_refused(idp):
    console = oidc(idp)
    theirs, nonce = await id_token(oidc(idp, "other-app", "other-secret"))
    with pytest.raises(SignInRefused, match="audience 'other-app', not this console"):
        await console.verify(theirs, nonce)
    token, nonce = await id_token(console)
    expiry = (await console.verify(token, nonce))["exp"]
    later = oidc(idp, clock=lambda: expiry + 61)  # past its expiry by more than the leeway (60 s)
    with pytest.raises(SignInRefused, match="expired"):
        await later.verify(token, nonce)
    assert (await oidc(idp, clock=lambda: expiry + 59).verify(token, nonce))["sub"] == "alice"
    with pytest.raises(SignInRefused, match="nonce"):
        await console.verify(token, "another-sign-ins-nonce")


async def test_a_forged_id_token_is_refused_and_an_unknown_key_refetches_the_jwks_once(idp):
    console = oidc(idp)
    token, nonce = await id_token(console)
    claims = dict(jwt.decode(token, await console.keys()).claims, sub="mallory", groups=["admin"])
    kid = jwt.decode(token, await console.keys()).header["kid"]
    forger = RSAKey.generate_key(2048, parameters={"kid": kid})
    with pytest.raises(SignInRefused, match="signature does not verify"):
        await console.verify(jwt.encode({"alg": "RS256", "kid": kid}, claims, forger), nonce)
    fetched = console._keys_at
    stranger = RSAKey.generate_key(2048, parameters={"kid": "not-the-providers"})
    with pytest.raises(SignInRefused, match="does not publish"):
        await console.verify(jwt.encode({"alg": "RS256", "kid": "not-the-providers"}, claims, stranger), nonce)
    assert console._keys_at == fetched  # fetched within REFETCH_AFTER_S: not again
    console._keys_at -= 60
    with pytest.raises(SignInRefused, match="does not publish"):
        await console.verify(jwt.encode({"alg": "RS256", "kid": "not-the-providers"}, claims, stranger), nonce)
    assert console._keys_at > fetched  # an unknown key id: the JWKS fetched again
    with pytest.raises(SignInRefused, match="signature"):
        await console.verify(jwt.encode({"alg": "HS256"}, claims, jwt_secret()), nonce)


def jwt_secret():
    from joserfc.jwk import OctKey

    return OctKey.import_key(SECRET.encode() * 2)


async def test_a_proxy_header_counts_only_from_a_trusted_address(client, settings):
    people = Authenticator(console_token="s3cret", proxies=tuple(networks("10.1.2.3/32")))
    headers = {"X-Forwarded-User": "carol", "X-Forwarded-Email": "carol@example.com", "X-Forwarded-Groups": "ops,approver"}
    async with console_app(client, settings, people, address="127.0.0.1") as direct:
        assert (await direct.get("/", headers=headers)).status_code == 401
    async with console_app(client, settings, people, address="10.1.2.3") as proxied:
        page = await proxied.get("/", headers=headers)
        assert page.status_code == 200 and "<b id=signed-in>carol</b> (proxy)" in page.text
        assert (await proxied.get("/")).status_code == 401  # the proxy's own requests, nobody named
        passed_on = await proxied.get("/", headers={**headers, "Authorization": "Bearer the-idps-access-token"})
        assert passed_on.status_code == 200 and "<b id=signed-in>carol</b> (proxy)" in passed_on.text
    async with console_app(client, settings, people, address="127.0.0.1") as direct:
        passed_on = await direct.get("/", headers={**headers, "Authorization": "Bearer the-idps-access-token"})
        assert passed_on.status_code == 401
    principal = people.by_proxy(httpx.Headers(headers), "10.1.2.3")
    assert principal is not None and principal.roles == ["ops", "approver"] and principal.via == "proxy"


async def test_a_persons_token_names_them_with_their_roles_until_they_are_removed(client, settings, tmp_path):
    users = open_users(f"sqlite:///{tmp_path}/ledger.sqlite3")
    token = users.add("bob", ["approver"])
    people = Authenticator(console_token="s3cret", users=users)
    async with console_app(client, settings, people) as console:
        page = await console.get("/", headers={"Authorization": f"Bearer {token}"})
        assert page.status_code == 200 and "<b id=signed-in>bob</b> (token)" in page.text
        bob = await people.by_token(token)
        assert bob is not None and (bob.subject, bob.roles, bob.via) == ("bob", ["approver"], "token")
        shared = await people.by_token("s3cret")
        assert shared is not None and shared.via == "console-token" and shared.subject == "console"
        assert (await console.get("/", headers={"Authorization": f"Bearer {token[:-1]}x"})).status_code == 401
    async with console_app(client, settings, people) as browser:  # the sign-in form takes a person's token too
        form = await browser.get("/login")
        csrf = re.search(r'name=csrf value="([0-9a-f]+)"', form.text).group(1)
        assert (await browser.post("/login", data={"csrf": csrf, "token": "guess"})).status_code == 401
        signed = await browser.post("/login", data={"csrf": csrf, "token": token, "next": "/inbox"})
        assert signed.status_code == 303 and signed.headers["location"] == "/inbox"
        assert "<b id=signed-in>bob</b> (token)" in (await browser.get("/inbox")).text
        users.remove("bob")
        assert (await browser.get("/inbox")).status_code == 401
        assert (await browser.get("/", headers={"Authorization": f"Bearer {token}"})).status_code == 401
