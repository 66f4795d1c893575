"""What every console request passes before its handler: HttpGuard (ratchet/ops/http_guard.py:
Host, Origin, the token), then for a form POST its media type and CSRF token; and the headers
every answer carries. A body over MAX_FORM_BYTES never reaches a handler: `BodyLimit` (the same
middleware as every Ratchet server's, ratchet/console/app.py) answers 413 as it arrives."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from urllib.parse import parse_qsl

from starlette.requests import Request
from starlette.responses import Response

from ratchet.console import csrf
from ratchet.console.html import query_url
from ratchet.contracts.identity import Principal
from ratchet.ops.http_guard import HttpGuard, Refusal

TOKEN_COOKIE = "ratchet_console_token"
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


class _WithToken:
    """A request's headers, with the sign-in cookie's token as `Authorization` when it has none
    (a browser sends no bearer header when it follows a link)."""

    def __init__(self, request: Request) -> None:
        self.request = request

    def get(self, name: str, /) -> str | None:
        value = self.request.headers.get(name)
        if value is None and name.lower() == "authorization" and TOKEN_COOKIE in self.request.cookies:
            return f"Bearer {self.request.cookies[TOKEN_COOKIE]}"
        return value


@dataclass
class Visit:
    """What a handler gets besides the request: the page's CSRF token, the form's fields."""

    token: str
    nonce: str
    new_nonce: bool
    forms: csrf.Csrf
    form: dict[str, str] = field(default_factory=dict)
    principal: Principal | None = None
    """Who is signed in (None: the single-user console token's person, `Settings.console_principal`)."""

    def note_url(self, path: str, text: str, kind: str = "ok") -> str:
        """`path` showing `text` once, signed so that a link from elsewhere cannot put words on the page."""
        return query_url(path, note=text, kind=kind, sig=self.forms.token_for(f"{kind}:{text}"))

    def note(self, request: Request) -> tuple[str, str] | None:
        """The signed note of `note_url` in this request's query, or None."""
        text, kind, sig = (request.query_params.get(k, "") for k in ("note", "kind", "sig"))
        if text and kind in ("ok", "error") and self.forms.valid(f"{kind}:{text}", sig):
            return text, kind
        return None


@dataclass(frozen=True)
class ConsoleGuard:
    http: HttpGuard
    forms: csrf.Csrf = field(default_factory=csrf.Csrf)

    def refusal(self, request: Request, needs_token: bool = True) -> Refusal | None:
        guard = self.http if needs_token else replace(self.http, token=None)
        return guard.check(request.method, _WithToken(request), json_body=False)

    def token_matches(self, given: str) -> bool:
        return self.http.accepts_token(given)

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
