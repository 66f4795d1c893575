"""The rules every HTTP server Ratchet starts applies to a request before it reads the body.

A server on 127.0.0.1 is still reachable from any web page its user opens: a page on
`evil.example` can point that name at 127.0.0.1 (DNS rebinding) and is then same-origin with the
server, so CORS protects nothing, and any page may send a "simple" cross-origin POST (text/plain,
no preflight). So, in this order:

1. **Host** must be one of the allowed names (the loopback names and the bound address by
   default; more with `allowed_hosts`), else 421 Misdirected Request. A rebinding page's requests
   carry its own name.
2. **Origin**, when the request has one (every browser POST does), must be an allowed origin,
   else 403. Programs (the Temporal CLI, curl, SDKs) send none. A server that serves its own
   pages (`ratchet console`, `same_origin`) also allows its own origin: `http://` plus the Host
   header, which rule 1 has checked, so a rebinding page's origin never matches.
3. **A bearer token**, when the server has one: `Authorization: Bearer <token>` (how the Temporal
   Web UI passes its access token, `codec.passAccessToken`, and `temporal --codec-auth`), compared
   in constant time, else 401. A server bound to anything but loopback must have one
   (`HttpGuard.for_server` refuses to build otherwise, unless the server signs people in itself).
   CORS preflights carry no credentials, so they are answered without it. `ratchet console` and
   `ratchet serve` apply rules 1, 2 and 4 here and name the person instead of this rule
   (ratchet/people/authenticate.py: the same token, people's own tokens, sessions, proxies).
4. **JSON bodies only** for the JSON endpoints (`Content-Type: application/json`), else 415: a
   browser cannot send that cross-origin without a preflight, which rule 2 refuses.

And around the app, `BodyLimit` (ASGI middleware): a body over the server's limit is 413 as it
arrives, chunked or not, and the server reads no further.

Refusals never echo a token. `ratchet mcp --port` keeps the MCP SDK's own checks of the same kind.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from dataclasses import dataclass
from typing import Any, Protocol

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


class GuardSettingsError(ValueError):
    """A server's guard is configured so that it would be open to anyone who reaches it."""


class Headers(Protocol):
    """A request's headers, looked up case-insensitively (Starlette's Headers)."""

    def get(self, name: str, /) -> str | None: ...


@dataclass(frozen=True)
class Refusal:
    status: int
    reason: str


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def host_name(header: str) -> str:
    """The name in a Host header, without its port: `a.b:81` -> `a.b`, `[::1]:81` -> `::1`."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:].split("]", 1)[0]
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


@dataclass(frozen=True)
class HttpGuard:
    allowed_hosts: frozenset[str]
    """Host names (no port) requests may be addressed to."""
    allowed_origins: frozenset[str]
    """Browser origins (`scheme://host[:port]`) that may call; requests without Origin are programs."""
    token: str | None = None
    """The bearer token every request but a CORS preflight must carry; None: no token asked."""
    same_origin: bool = False
    """Allow the server's own origin (`http://<Host header>`): a server whose pages post to it."""

    @classmethod
    def for_server(
        cls,
        bind: str,
        origins: Iterable[str] = (),
        hosts: Iterable[str] = (),
        token: str | None = None,
        token_setting: str = "the token setting",
        same_origin: bool = False,
        signs_in: bool = False,
    ) -> HttpGuard:
        """The guard of a server bound to `bind`: loopback names and `bind` itself (unless a
        wildcard) as hosts, plus `hosts`. Raises GuardSettingsError for a non-loopback bind
        without a token, naming `token_setting`, unless the server `signs_in` people itself
        (OpenID Connect, a trusted proxy: ratchet/people/authenticate.py)."""
        if not is_loopback(bind) and not token and not signs_in:
            raise GuardSettingsError(
                f"--host {bind} is reachable from other machines: set {token_setting} (clients send "
                "`Authorization: Bearer <token>`), or bind to 127.0.0.1"
            )
        names = set(LOOPBACK_NAMES) | {h.strip().lower() for h in hosts if h.strip()}
        if bind not in ("0.0.0.0", "::", ""):
            names.add(host_name(bind))
        allowed = frozenset(o.strip().rstrip("/") for o in origins if o.strip())
        return cls(frozenset(names), allowed, token or None, same_origin)

    def check(self, method: str, headers: Headers, json_body: bool = True, signed: bool = False) -> Refusal | None:
        """Why this request is refused, or None. `headers` is case-insensitive (Starlette's
        Headers); `json_body`: the endpoint reads a JSON body; `signed`: the endpoint checks a
        signature of its own instead of the bearer token (a webhook: its sender has no token)."""
        host = host_name(headers.get("Host") or "")
        if host not in self.allowed_hosts:
            return Refusal(421, f"this server does not answer for host {host!r}")
        origin = headers.get("Origin")
        own = self.same_origin and origin is not None and origin.rstrip("/") == "http://" + (headers.get("Host") or "")
        if origin is not None and not own and origin.rstrip("/") not in self.allowed_origins:
            return Refusal(403, f"origin {origin!r} is not allowed (configure it as an allowed origin)")
        if method == "OPTIONS":
            return None
        if self.token is not None and not signed and not self._token_matches(headers.get("Authorization") or ""):
            return Refusal(401, "a valid `Authorization: Bearer <token>` header is required")
        if json_body and method in ("POST", "PUT", "PATCH"):
            media_type = (headers.get("Content-Type") or "").split(";", 1)[0].strip().lower()
            if media_type != "application/json":
                return Refusal(415, "the body must be sent as Content-Type: application/json")
        return None

    def accepts_token(self, given: str) -> bool:
        """`given` is the server's token (compared in constant time); any is, when it has none."""
        return self.token is None or self._token_matches(f"Bearer {given}")

    def _token_matches(self, authorization: str) -> bool:
        scheme, _, given = authorization.partition(" ")
        assert self.token is not None
        return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), self.token.encode())

    def allows_origin(self, origin: str | None) -> bool:
        return origin is not None and origin.rstrip("/") in self.allowed_origins


Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class BodyTooLarge(Exception):
    """Raised by `BodyLimit`'s `receive` once a request's body has passed the limit: the app
    stops reading, and the middleware answers 413 in its place."""


def size(n: int) -> str:
    """`1048576` -> `1 MiB`; bytes when not a whole number of KiB or MiB."""
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} bytes"


class BodyLimit:
    """ASGI middleware: a request body over `max_bytes` is refused with 413 while it arrives.

    A `Content-Length` over the limit is answered before a byte of the body is read (and before
    `Expect: 100-continue` is granted); any other body (chunked, or longer than it said) is counted
    as the app reads it, and the read that passes the limit raises `BodyTooLarge` in the app, so
    nothing more is read or kept. Whatever the app then sends is dropped: `answer(refusal)`, an
    ASGI app (the server's own error format), answers instead, with `Connection: close`, so the
    server closes the connection rather than reading the rest of the body to reuse it. Memory per
    request stays within `max_bytes` plus the server's read buffer (uvicorn pauses at 64 KiB).

    Used as `Starlette(middleware=[Middleware(BodyLimit, max_bytes=..., answer=...)])`: inside
    Starlette's error middleware, so a refusal is never turned into a 500."""

    def __init__(self, app: ASGIApp, max_bytes: int, answer: Callable[[Refusal], ASGIApp]) -> None:
        self.app, self.max_bytes, self.answer = app, max_bytes, answer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        refusal = Refusal(413, f"the request body is over this server's limit of {size(self.max_bytes)}")
        if _content_length(scope) > self.max_bytes:
            return await self._refuse(refusal, scope, receive, send)
        read, over, started = 0, False, False

        async def limited() -> Message:
            nonlocal read, over
            message = await receive()
            if message["type"] == "http.request":
                read += len(message.get("body", b""))
                if read > self.max_bytes:
                    over = True
                    raise BodyTooLarge(refusal.reason)
            return message

        async def tracked(message: Message) -> None:
            nonlocal started
            if over and not started:
                return  # the app's answer to BodyTooLarge (its error page): the 413 goes instead
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, limited, tracked)
        except Exception:
            if not over or started:
                raise
        if over and not started:
            await self._refuse(refusal, scope, receive, send)

    async def _refuse(self, refusal: Refusal, scope: Scope, receive: Receive, send: Send) -> None:
        async def closing(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"connection"]
                message = {**message, "headers": [*headers, (b"connection", b"close")]}
            await send(message)

        await self.answer(refusal)(scope, receive, closing)


def _content_length(scope: Scope) -> int:
    """The request's Content-Length, 0 without one (the server has checked its syntax)."""
    for name, value in scope.get("headers", []):
        if name.lower() == b"content-length":
            try:
                return int(value)
            except ValueError:
                return 0
    return 0
