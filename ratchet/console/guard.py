"""What every console request passes before its handler: HttpGuard (ratchet/ops/http_guard.py:
Host, Origin), who it comes from (`Authenticator`, ratchet/people/authenticate.py: a token, the
session of an OpenID Connect sign-in, a trusted proxy's header, or the single user on loopback),
then for a form POST its media type and CSRF token; and the headers
every answer carries. A body over MAX_FORM_BYTES never reaches a handler: `BodyLimit` (the same
middleware as every Ratchet server's, ratchet/console/app.py) answers 413 as it arrives."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl

from starlette.requests import Request
from starlette.responses import Response

from ratchet.console import csrf
from ratchet.console.html import query_url
from ratchet.contracts.identity import Principal
from ratchet.ops.http_guard import HttpGuard, Refusal
from ratchet.people.authenticate import Authenticator

if TYPE_CHECKING:
    from ratchet.console.signin import OidcSignIn

FORM_TYPE = "application/x-www-form-urlencoded"
MAX_FORM_BYTES = 1 << 20
"""A request body at most (a form: an objective, a message, a reason), enforced by `BodyLimit`."""
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    # not no-referrer: under it Chromium sends `Origin: null` with the console's own form posts,
    # which the Origin rule must refuse; same-origin sends nothing to any other site either.
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}


@dataclass
class Visit:
    """What a handler gets besides the request: the page's CSRF token, the form's fields, who sent it."""

    token: str
    nonce: str
    new_nonce: bool
    forms: csrf.Csrf
    form: dict[str, str] = field(default_factory=dict)
    principal: Principal | None = None
    """The person (None only on the pages anyone may see: sign-in, static files)."""

    @property
    def person(self) -> Principal:
        """Who sent a request to a page that needs a person (`ConsoleGuard.admit` refused it otherwise):
        the signed-in person, or the single user's `Authenticator.console_principal`."""
        assert self.principal is not None, "a page that needs a person was reached without one"
        return self.principal

    def note_url(self, path: str, text: str, kind: str = "ok") -> str:
        """`path` showing `text` once, signed so that a link from elsewhere cannot put words on the page."""
        return query_url(path, note=text, kind=kind, sig=self.forms.token_for(f"{kind}:{text}"))

    def note(self, request: Request) -> tuple[str, str] | None:
        """The signed note of `note_url` in this request's query, or None."""
        text, kind, sig = (request.query_params.get(k, "") for k in ("note", "kind", "sig"))
        if text and kind in ("ok", "error") and self.forms.valid(f"{kind}:{text}", sig):
            return text, kind
        return None


def single_user(http: HttpGuard, roles: Sequence[str] = ("approver",)) -> Authenticator:
    """The console's token's holder (`http.token`) alone, or with no token the single user, in `roles`
    (RATCHET_ROLES): `ratchet console` without sign-in settings."""
    return Authenticator(console_token=http.token, single_user=http.token is None, console_roles=tuple(roles))


@dataclass(frozen=True)
class ConsoleGuard:
    http: HttpGuard
    forms: csrf.Csrf = field(default_factory=csrf.Csrf)
    people: Authenticator | None = None
    """Who requests come from; None: the console's token (`http.token`) alone, or the single user
    on loopback when it has none (as `ratchet console` without sign-in settings)."""
    oidc: OidcSignIn | None = None
    """OpenID Connect sign-in (RATCHET_OIDC_ISSUER), or None."""

    def __post_init__(self) -> None:
        if self.people is None:
            object.__setattr__(self, "people", single_user(self.http))

    @property
    def authenticator(self) -> Authenticator:
        assert self.people is not None
        return self.people

    async def admit(self, request: Request, visit: Visit, needs_sign_in: bool = True) -> Refusal | None:
        """Why this request is refused (Host, Origin, nobody signed in), or None; `visit.principal`
        is who sent it."""
        refused = replace(self.http, token=None).check(request.method, request.headers, json_body=False)
        if refused is not None:
            return refused
        client = request.client.host if request.client else None
        visit.principal = await self.authenticator.identify(request.headers, request.cookies, client)
        if visit.principal is None and needs_sign_in:
            return Refusal(401, "sign in first: a valid `Authorization: Bearer <token>` header, or a session")
        return None

    def visit(self, request: Request) -> Visit:
        nonce = request.cookies.get(csrf.COOKIE) or ""
        fresh = len(nonce) < 16
        nonce = csrf.Csrf.new_nonce() if fresh else nonce
        return Visit(token=self.forms.token_for(nonce), nonce=nonce, new_nonce=fresh, forms=self.forms)

    async def form(self, request: Request, visit: Visit) -> Refusal | None:
        """Read a POST's form into `visit.form`; why it is refused (media type, CSRF), or None."""
        media_type = (request.headers.get("Content-Type") or "").split(";", 1)[0].strip().lower()
        if media_type != FORM_TYPE:
            return Refusal(415, f"a console form is sent as {FORM_TYPE}, not {media_type or 'nothing'}")
        body = await request.body()  # at most MAX_FORM_BYTES: BodyLimit stops the read past it
        visit.form = dict(parse_qsl(body.decode(errors="replace"), keep_blank_values=True))
        if visit.new_nonce or not self.forms.valid(visit.nonce, visit.form.get(csrf.FIELD)):
            return Refusal(
                403,
                "this form was not sent from a page of this console, or the page is stale: reload it and send again",
            )
        return None


def secured(response: Response, visit: Visit | None) -> Response:
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)
    if visit is not None and visit.new_nonce:
        response.set_cookie(csrf.COOKIE, visit.nonce, httponly=True, samesite="strict", path="/")
    return response
