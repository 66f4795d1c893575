"""`ratchet serve`: runs over HTTP for browsers and other languages (Starlette, served by uvicorn).

    GET  /runs/{id}/events?topics=tokens,steps&from_offset=0   Server-Sent Events, one per run event:
         `id:` its offset, `event:` its kind, `data:` the event (ratchet/contracts/events.py) as JSON;
         a reconnect with `Last-Event-ID` resumes after it. Ends when the run closes.
    POST /agui                                                 AG-UI: a `RunAgentInput` starts the
         thread's run or sends it a message; the answer is the run as AG-UI events (ratchet/serve/agui.py)
    POST /hooks/{name}                                         a webhook RATCHET_HOOKS declares: signed
         (HMAC), it starts a run, sends a session a message or decides a call; 202 with the run's id
         (ratchet/serve/hooks.py). No bearer token: the signature is its authentication.

Every request passes `HttpGuard` first (ratchet/ops/http_guard.py: Host, Origin, JSON bodies), then
the `Authenticator` (ratchet/people/authenticate.py) names its person, a `Principal` on
`request.state.principal`: the bearer token RATCHET_SERVE_TOKEN (the single user), a person's API
token (`ratchet users add`), a trusted proxy's identity header; else 401. So a web page the user
opens cannot drive runs; binding beyond
loopback needs the token; a body over MAX_BODY_BYTES is 413 as it arrives, and no more of it is read
(`BodyLimit`). A bad request is an HTTP error before any event: 404 for a run that does not exist or
a path that is not one of the two, 400 for an unknown topic, an offset beyond the stream or an input
that does not validate (a run id Temporal refuses, an empty or too long `threadId`, included).
Everything goes through `ratchet.client` (payloads decoded with the client's codec keys; the
stream carries what the worker redacted).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import replace
from functools import partial

from ag_ui.core import RunAgentInput
from ag_ui.encoder import EventEncoder
from pydantic import ValidationError
from sse_starlette import EventSourceResponse
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from ratchet.client import InvalidInput, RatchetClient, RatchetError, Refused, RunNotFound
from ratchet.contracts.events import RunEvent
from ratchet.ops.http_guard import BodyLimit, HttpGuard, Refusal
from ratchet.people.authenticate import Authenticator
from ratchet.serve import agui
from ratchet.serve.hooks import Hook
from ratchet.serve.taking_hooks import take_hook

TOKEN_SETTING = "RATCHET_SERVE_TOKEN"
ALLOWED_HEADERS = "Authorization, Content-Type, Last-Event-ID, Accept"
MAX_BODY_BYTES = 4 << 20
"""An AG-UI request's body at most: a client sends the conversation it holds each time (Ratchet
reads only its last user message and `forwardedProps`), and a start input is bounded far below
this by Temporal's own payload limit (2 MB by default)."""

Handler = Callable[[Request], Awaitable[Response]]


def build_app(
    client: RatchetClient,
    guard: HttpGuard,
    max_body_bytes: int = MAX_BODY_BYTES,
    hooks: Mapping[str, Hook] | None = None,
    people: Authenticator | None = None,
) -> Starlette:
    people = people or Authenticator(console_token=guard.token, single_user=guard.token is None)

    def guarded(handler: Handler, json_body: bool = False, signed: bool = False) -> Handler:
        async def endpoint(request: Request) -> Response:
            refused = await _admit(guard, people, request, json_body, signed)
            if refused is not None:
                response: Response = JSONResponse({"error": refused.reason}, status_code=refused.status)
            elif request.method == "OPTIONS":
                response = Response(status_code=204)
                response.headers["Access-Control-Allow-Methods"] = "GET, POST, OPTIONS"
                response.headers["Access-Control-Allow-Headers"] = ALLOWED_HEADERS
            else:
                try:
                    response = await handler(request)
                except RatchetError as exc:
                    response = _error(exc)
            return _cors(guard, request, response)

        return endpoint

    async def run_events(request: Request) -> Response:
        run = client.get(request.path_params["workflow_id"])
        topics = [t for t in request.query_params.get("topics", "").split(",") if t]
        stream = await run.open_stream(from_offset=_offset(request), topics=topics, shared=True)
        return EventSourceResponse(_sse(stream))

    async def agui_run(request: Request) -> Response:
        try:
            body = RunAgentInput.model_validate_json(await request.body())
        except ValidationError as exc:
            raise InvalidInput.of("AG-UI input", exc) from None
        encoder = EventEncoder(accept=request.headers.get("accept", ""))
        events = await agui.run_events(client, body)
        return StreamingResponse(
            (encoder.encode(event) async for event in events), media_type=encoder.get_content_type()
        )

    async def hook(request: Request) -> Response:
        return await take_hook(client, hooks or {}, request.path_params["name"], await request.body(), request.headers)

    return Starlette(
        routes=[
            Route("/runs/{workflow_id:path}/events", guarded(run_events), methods=["GET", "OPTIONS"]),
            Route("/agui", guarded(agui_run, json_body=True), methods=["POST", "OPTIONS"]),
            Route("/hooks/{name}", guarded(hook, json_body=True, signed=True), methods=["POST"]),
        ],
        middleware=[Middleware(BodyLimit, max_bytes=max_body_bytes, answer=partial(_refused, guard))],
    )


def _refused(guard: HttpGuard, refusal: Refusal) -> ASGIApp:
    """The answer `BodyLimit` sends for `refusal`: its reason as JSON, with CORS headers."""

    async def answer(scope: Scope, receive: Receive, send: Send) -> None:
        response = JSONResponse({"error": refusal.reason}, status_code=refusal.status)
        await _cors(guard, Request(scope), response)(scope, receive, send)

    return answer


async def _admit(
    guard: HttpGuard, people: Authenticator, request: Request, json_body: bool, signed: bool
) -> Refusal | None:
    """Why `request` is refused (`guard`'s Host, Origin, JSON; then nobody named by `people`: its
    token is one of theirs), or None with its person on `request.state.principal`. A signed hook
    proves itself."""
    refused = replace(guard, token=None).check(request.method, request.headers, json_body=json_body, signed=signed)
    if refused is not None or signed or request.method == "OPTIONS":
        return refused
    client = request.client.host if request.client else None
    request.state.principal = await people.identify(request.headers, request.cookies, client)
    if request.state.principal is None:
        return Refusal(401, "a valid `Authorization: Bearer <token>` header is required")
    return None


def _cors(guard: HttpGuard, request: Request, response: Response) -> Response:
    """`response` with the CORS headers of an allowed origin (none for any other)."""
    origin = request.headers.get("Origin")
    if guard.allows_origin(origin):
        response.headers["Access-Control-Allow-Origin"] = origin or ""
        response.headers["Access-Control-Allow-Credentials"] = "true"
        response.headers["Vary"] = "Origin"
    return response


def _offset(request: Request) -> int:
    """Where to start: after `Last-Event-ID` (a reconnect), else `from_offset` (default 0)."""
    last = request.headers.get("Last-Event-ID")
    raw, after = (last, 1) if last else (request.query_params.get("from_offset", "0"), 0)
    try:
        return int(raw) + after
    except ValueError:
        what = "Last-Event-ID" if last else "from_offset"
        raise InvalidInput("stream", [f"{what}: must be an offset (a whole number), not {raw!r}"]) from None


async def _sse(stream: AsyncIterator[RunEvent]) -> AsyncIterator[dict]:
    async for event in stream:
        yield {"id": str(event.offset), "event": event.kind, "data": event.model_dump_json()}


def _error(exc: RatchetError) -> Response:
    status = 404 if isinstance(exc, RunNotFound) else 400 if isinstance(exc, InvalidInput) else 409
    if not isinstance(exc, (RunNotFound, InvalidInput, Refused)):
        status = 502
    return JSONResponse({"error": str(exc)}, status_code=status)
