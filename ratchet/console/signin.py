"""The console's sign-in and sign-out (docs/SECURITY.md, "Sign-in").

GET  /login           the sign-in page: a link to the OpenID provider (when one is configured)
                      and a form for a token (the console's, or a person's API token)
POST /login           the token, kept in an HttpOnly, SameSite=Strict cookie
GET  /auth/login      OpenID Connect: a fresh state, nonce and PKCE verifier in a signed cookie,
                      then to the provider's authorization endpoint
GET  /auth/callback   the provider's answer: state checked, code exchanged, ID token verified
                      (ratchet/people/oidc.py), then the session cookie carries the person
POST /logout          both cookies cleared
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from ratchet.console.forms_view import error_page, login_page
from ratchet.console.guard import ConsoleGuard, Visit
from ratchet.contracts.identity import Principal
from ratchet.people.authenticate import TOKEN_COOKIE, roles_of
from ratchet.people.oidc import OidcClient, SignInRefused
from ratchet.people.sessions import FLOW_COOKIE, FLOW_TTL_S, SESSION_COOKIE

CALLBACK = "/auth/callback"


@dataclass(frozen=True)
class OidcSignIn:
    client: OidcClient
    roles_claim: str = "groups"
    public_url: str | None = None
    """The console's URL as browsers reach it (RATCHET_CONSOLE_URL); None: http:// and the Host."""

    def redirect_uri(self, request: Request) -> str:
        base = self.public_url or f"http://{request.headers.get('host', '')}"
        return base + CALLBACK


def login(console: ConsoleGuard):
    async def page(request: Request, visit: Visit) -> Response:
        if request.method == "GET":
            back = _next(request.query_params.get("next", "/"))
            return HTMLResponse(login_page(visit.token, oidc=console.oidc is not None, back=back))
        given = visit.form.get("token", "").strip()
        if not given or await console.authenticator.by_token(given) is None:
            problem = "That is not the console's token, nor a person's."
            return HTMLResponse(login_page(visit.token, problem, oidc=console.oidc is not None), status_code=401)
        response = RedirectResponse(_next(visit.form.get("next", "/")), status_code=303)
        response.set_cookie(TOKEN_COOKIE, given, httponly=True, samesite="strict", path="/")
        response.delete_cookie(SESSION_COOKIE, path="/")
        return response

    return page


def start(console: ConsoleGuard):
    async def begin(request: Request, visit: Visit) -> Response:
        if console.oidc is None:
            return _refused(404, "This console has no OpenID provider (RATCHET_OIDC_ISSUER).")
        back = _next(request.query_params.get("next", "/"))
        try:
            flow = await console.oidc.client.start(console.oidc.redirect_uri(request))
        except SignInRefused as exc:
            return _refused(502, str(exc))
        sealed = console.authenticator.sessions.seal(
            {"state": flow.state, "nonce": flow.nonce, "verifier": flow.verifier, "next": back}, FLOW_TTL_S
        )
        response = RedirectResponse(flow.url, status_code=302)
        response.set_cookie(FLOW_COOKIE, sealed, max_age=int(FLOW_TTL_S), httponly=True, samesite="lax", path="/auth")
        return response

    return begin


def callback(console: ConsoleGuard):
    async def finish(request: Request, visit: Visit) -> Response:
        if console.oidc is None:
            return _refused(404, "This console has no OpenID provider (RATCHET_OIDC_ISSUER).")
        flow = console.authenticator.sessions.open(request.cookies.get(FLOW_COOKIE))
        params = request.query_params
        if flow is None:
            return _refused(
                400, "No sign-in is in progress in this browser (or it took over ten minutes): start again."
            )
        if not secrets.compare_digest(params.get("state", "").encode(), str(flow.get("state", "")).encode()):
            return _refused(400, "The provider's answer is not for this browser's sign-in (state): start again.")
        if "iss" in params and params["iss"] != console.oidc.client.issuer:  # RFC 9207: another provider's answer
            return _refused(400, f"The answer comes from issuer {params['iss']!r}, not this console's provider.")
        if "error" in params:
            return _refused(
                401, f"The provider refused the sign-in: {params['error']} {params.get('error_description', '')}"
            )
        try:
            claims = await console.oidc.client.finish(
                params.get("code", ""), str(flow["verifier"]), str(flow["nonce"]), console.oidc.redirect_uri(request)
            )
        except SignInRefused as exc:
            return _refused(401, f"Not signed in: {exc}.")
        principal = Principal(
            subject=str(claims["sub"]),
            issuer=console.oidc.client.issuer,
            roles=roles_of(claims, console.oidc.roles_claim),
            via="oidc",
        )
        response = RedirectResponse(str(flow.get("next") or "/"), status_code=303)
        response.set_cookie(
            SESSION_COOKIE,
            console.authenticator.sessions.session(principal),
            max_age=int(console.authenticator.sessions.ttl_s),
            httponly=True,
            samesite="lax",
            path="/",
            secure=(console.oidc.public_url or "").startswith("https://"),
        )
        response.delete_cookie(FLOW_COOKIE, path="/auth")
        response.delete_cookie(TOKEN_COOKIE, path="/")
        return response

    return finish


async def logout(request: Request, visit: Visit) -> Response:
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/")
    response.delete_cookie(TOKEN_COOKIE, path="/")
    return response


def _next(back: str) -> str:
    """Where to go after signing in: `back` if it is a path of this console, else its front page."""
    return back if back.startswith("/") and not back.startswith("//") and "\\" not in back else "/"


def _refused(status: int, detail: str) -> Response:
    return HTMLResponse(error_page(status, "Not signed in", detail), status_code=status)
