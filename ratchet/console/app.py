"""`ratchet console`: the web app (Starlette, served by uvicorn as `ratchet serve` is).

    GET  /                                  runs, filtered by agent, phase, awaiting; paged
    GET  /inbox                             every pending approval and decision, oldest first
    GET  /deploys                           the worker deployment's builds, their runs, the ramp guard
    GET  /schedules                         the schedules, their next and latest firings; POST
         /schedules/{name}/{pause,resume,trigger}
    GET  /start, POST /start                start a run, checked as `ratchet start` checks it
    GET  /login, /auth/login, /auth/callback; POST /login, /logout   sign-in (ratchet/console/signin.py)
    GET  /runs/{id}                         a run: state, waiting calls, conversation, checkpoints
    GET  /runs/{id}/events                  its stream as Server-Sent Events (console.js shows them)
    GET  /runs/{id}/checkpoints/{cp}/rollback   the rollback plan; POST: roll back (the confirmation)
    POST /runs/{id}/{approve,reject,decide,send,ask,pause,resume,cancel}, .../checkpoints/{cp}/fork

Every request passes ConsoleGuard (ratchet/console/guard.py), which names the person who sent it
(a `Principal`, shown in the nav bar; a decision is recorded as theirs), and a body over MAX_FORM_BYTES is
413 as it arrives (`BodyLimit`); every action is the same client call the CLI makes, so the audit
trail is Temporal's history. Errors are pages, never traces; a path that is none of these is 404.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from ratchet.client import InvalidInput, RatchetClient, RatchetError, Refused, RunNotFound, Unavailable
from ratchet.console import actions, pages, signin
from ratchet.console.forms_view import error_page
from ratchet.console.guard import MAX_FORM_BYTES, ConsoleGuard, Visit, secured, single_user
from ratchet.console.html import SIGNED_IN, query_url
from ratchet.ops.http_guard import BodyLimit, HttpGuard, Refusal
from ratchet.payloads.codec import CodecKeyError

log = logging.getLogger("ratchet.console")

Handler = Callable[[Request, Visit], Awaitable[Response]]


def guarded(
    console: ConsoleGuard, handler: Handler, needs_sign_in: bool = True
) -> Callable[[Request], Awaitable[Response]]:
    """`handler` as an endpoint behind `console`: a refused request (no token, a forged post, a bad
    form) is a page saying why; a client error is its page (`failure`); anything else is logged and
    a page that says the log knows why."""

    async def endpoint(request: Request) -> Response:
        visit = console.visit(request)
        refused = await console.admit(request, visit, needs_sign_in)
        if refused is None and request.method == "POST":
            refused = await console.form(request, visit)
        if refused is not None and refused.status == 401 and _browsing(request):
            here = request.url.path + (f"?{request.url.query}" if request.url.query else "")
            return secured(RedirectResponse(query_url("/login", next=here), status_code=303), visit)
        if refused is not None:
            detail = refused.reason + (" (sign in at /login)" if refused.status == 401 else "")
            return secured(_page(refused.status, "Refused", detail), visit)
        who, alone = visit.principal, console.authenticator.single_user
        SIGNED_IN.set((who.subject, who.via, "" if alone else visit.token) if who and needs_sign_in else None)
        try:
            response = await handler(request, visit)
        except RatchetError as exc:
            response = failure(exc)
        except CodecKeyError as exc:  # an encrypted run, and this console lacks its key
            response = _page(502, "Cannot decrypt", f"{exc} (the console needs the workers' RATCHET_CODEC_KEYS)")
        except Exception:
            log.exception("console: %s %s", request.method, request.url.path)
            response = _page(500, "Something went wrong", "The console could not do this; its log says why.")
        return secured(response, visit)

    return endpoint


def build_app(client: RatchetClient, http: HttpGuard, guard: ConsoleGuard | None = None) -> Starlette:
    console = guard or ConsoleGuard(http, people=single_user(http, client.settings.roles))

    def bound(handler: Callable[[RatchetClient, Request, Visit], Awaitable[Response]]) -> Handler:
        async def call(request: Request, visit: Visit) -> Response:
            return await handler(client, request, visit)

        return call

    def acting(action: str) -> Handler:
        async def call(request: Request, visit: Visit) -> Response:
            return await actions.run_action(client, request, visit, action)

        return call

    routes = [
        Route("/", guarded(console, bound(pages.runs)), methods=["GET"]),
        Route("/inbox", guarded(console, bound(pages.inbox)), methods=["GET"]),
        Route("/handoffs", guarded(console, bound(pages.handoffs)), methods=["GET"]),
        Route("/deploys", guarded(console, bound(pages.deploys)), methods=["GET"]),
        Route("/shadows/{batch}", guarded(console, bound(pages.shadows)), methods=["GET"]),
        Route("/schedules", guarded(console, bound(pages.schedules)), methods=["GET"]),
        *(
            Route(f"/schedules/{{name}}/{verb}", guarded(console, bound(actions.schedule_action)), methods=["POST"])
            for verb in actions.SCHEDULE_ACTIONS
        ),
        Route("/start", guarded(console, bound(pages.start_form)), methods=["GET"]),
        Route("/start", guarded(console, bound(actions.start)), methods=["POST"]),
        Route("/login", guarded(console, signin.login(console), needs_sign_in=False), methods=["GET", "POST"]),
        Route("/auth/login", guarded(console, signin.start(console), needs_sign_in=False), methods=["GET"]),
        Route(signin.CALLBACK, guarded(console, signin.callback(console), needs_sign_in=False), methods=["GET"]),
        Route("/logout", guarded(console, signin.logout, needs_sign_in=False), methods=["POST"]),
        Route("/runs/{workflow_id}", guarded(console, bound(pages.run)), methods=["GET"]),
        Route("/runs/{workflow_id}/events", guarded(console, bound(pages.events)), methods=["GET"]),
        Route(
            "/runs/{workflow_id}/checkpoints/{checkpoint_id}/rollback",
            guarded(console, bound(pages.plan)),
            methods=["GET"],
        ),
        Route(
            "/runs/{workflow_id}/checkpoints/{checkpoint_id}/rollback",
            guarded(console, bound(actions.rollback)),
            methods=["POST"],
        ),
        Route(
            "/runs/{workflow_id}/checkpoints/{checkpoint_id}/fork",
            guarded(console, bound(actions.fork)),
            methods=["POST"],
        ),
        *(
            Route(f"/runs/{{workflow_id}}/{name}", guarded(console, acting(name)), methods=["POST"])
            for name in actions.ACTIONS
        ),
        Route("/static/{name}", guarded(console, pages.static, needs_sign_in=False), methods=["GET"]),
    ]
    limit = Middleware(BodyLimit, max_bytes=MAX_FORM_BYTES, answer=_too_large)
    return Starlette(routes=routes, middleware=[limit], exception_handlers={404: _not_found, 405: _not_allowed})


def _browsing(request: Request) -> bool:
    """A browser following a link (a GET for a page): sent to the sign-in page rather than a 401."""
    return request.method == "GET" and "text/html" in request.headers.get("accept", "")


def failure(exc: RatchetError) -> Response:
    """The page for a client error: no such run 404, bad input 400, refused 409, unreachable 503."""
    if isinstance(exc, RunNotFound):
        return _page(404, "No such run", str(exc))
    if isinstance(exc, InvalidInput):
        return _page(400, "Not valid", str(exc))
    if isinstance(exc, Refused):
        return _page(409, "Refused", str(exc))
    if isinstance(exc, Unavailable):
        return _page(503, "Temporal is unavailable", str(exc))
    return _page(502, "Temporal did not do it", str(exc))


def _too_large(refusal: Refusal) -> Response:
    return secured(_page(refusal.status, "Too large", refusal.reason), None)


def _page(status: int, title: str, detail: str) -> Response:
    return HTMLResponse(error_page(status, title, detail), status_code=status)


async def _not_found(request: Request, exc: Exception) -> Response:
    return secured(_page(404, "Not found", f"There is no page {request.url.path}."), None)


async def _not_allowed(request: Request, exc: Exception) -> Response:
    return secured(_page(405, "Not allowed", f"{request.method} is not how {request.url.path} is used."), None)
