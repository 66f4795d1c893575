"""`ratchet codec-server`: Temporal's remote codec protocol over HTTP, for the Web UI and CLI.

POST .../encode and POST .../decode take a `Payloads` message as protobuf JSON
(`{"payloads": [{"metadata": {k: base64}, "data": base64}]}`) and answer the same shape; only
the last path segment selects the action, so the server may sit under any prefix, e.g.
`http://host:8081/{namespace}`. The namespace comes from the `X-Namespace` header (else the
segment before the action); a request for a namespace other than TEMPORAL_NAMESPACE is refused.
Browsers get CORS answers for the configured Web UI origins only.

Every request passes the rules of ratchet/ops/http_guard.py first: a Host other than the loopback
names, the bound address or `--allowed-host` is answered 421 (a DNS-rebinding page), an Origin
other than `--cors-origin` 403, a body that is not `application/json` 415, and, when
RATCHET_CODEC_TOKEN is set (required for a non-loopback `--host`), a request without
`Authorization: Bearer <token>` 401. `/encode` answers only with `--encode`: it seals whatever it
is sent with the workers' key, so the worker would accept it as genuine. A body over
MAX_BODY_BYTES is 413 as it arrives, chunked or not, and no more of it is read (`BodyLimit`).

The server transforms payloads with the workers' data converter (`data_converter(settings)`,
ratchet/payloads/converter.py), values untouched: decoding resolves offloaded payloads (the SDK's
external-storage references, ratchet/payloads/offload.py) from the artifact store at
RATCHET_ARTIFACT_DIR, then decrypts, so the UI shows a large tool output or state, not its
reference; encoding encrypts, then offloads what is large.

Anyone who can reach this server and passes those rules can decrypt. It runs on the same HTTP
stack as `ratchet serve` (Starlette on uvicorn, in a thread of its own).
"""

from __future__ import annotations

import argparse
import logging
import signal
import threading
import time

import uvicorn
from google.protobuf import json_format
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send
from temporalio.api.common.v1 import Payload, Payloads
from temporalio.converter import DataConverter

from ratchet.payloads.codec import CodecKeyError, EncryptionCodec
from ratchet.ops.http_guard import BodyLimit, GuardSettingsError, HttpGuard, Refusal
from ratchet.payloads.converter import decode_payloads, encode_payloads
from ratchet.payloads.offload import OffloadedPayloadError

log = logging.getLogger("ratchet.payloads.codec_server")
MAX_BODY_BYTES = 64 * 1024 * 1024
ALLOWED_HEADERS = "X-Namespace, Content-Type, Authorization"
TOKEN_SETTING = "RATCHET_CODEC_TOKEN"
USAGE = "POST .../encode or .../decode\n"


class CodecServer:
    """The codec HTTP server (Starlette on uvicorn, as `ratchet serve`) in a daemon thread;
    `with CodecServer(...) as server:`.

    `converter`: the workers' data converter (`ratchet.payloads.converter.data_converter`); its
    payload codec and external storage are applied, never its payload converter. `allowed_hosts`,
    `cors_origins` and `token` configure the request rules (ratchet/ops/http_guard.py; a
    non-loopback `host` without a token raises GuardSettingsError); `encode` turns `/encode` on."""

    def __init__(
        self,
        converter: DataConverter,
        host: str = "127.0.0.1",
        port: int = 0,
        cors_origins: tuple[str, ...] = ("http://localhost:8080",),
        namespace: str | None = None,
        allowed_hosts: tuple[str, ...] = (),
        token: str | None = None,
        encode: bool = False,
    ) -> None:
        self.converter, self.host, self.port = converter, host, port
        self.guard = HttpGuard.for_server(host, cors_origins, allowed_hosts, token, TOKEN_SETTING)
        self.namespace, self.encode = namespace, encode
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def app(self) -> Starlette:
        route = Route("/{path:path}", self._handle, methods=["GET", "POST", "OPTIONS"])
        limit = Middleware(BodyLimit, max_bytes=MAX_BODY_BYTES, answer=self._refused)
        return Starlette(routes=[route], middleware=[limit])

    def start(self, timeout_s: float = 30) -> CodecServer:
        config = uvicorn.Config(
            self.app(), host=self.host, port=self.port, log_level="warning", access_log=False, lifespan="off"
        )
        self._server = server = uvicorn.Server(config)
        self._thread = threading.Thread(target=server.run, name="codec-server", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the codec server did not start on {self.host}:{self.port}")
            time.sleep(0.01)
        self.port = server.servers[0].sockets[0].getsockname()[1]
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None and self._thread is not None:
            server.should_exit = True
            self._thread.join(timeout=10)

    def __enter__(self) -> CodecServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def refusal(self, action: str, namespace: str | None) -> str | None:
        if action == "encode" and not self.encode:
            return (
                "encoding is off: it would seal anything it is sent with the workers' key; "
                "start `ratchet codec-server --encode` to encode inputs"
                " (e.g. `temporal workflow start --codec-endpoint`)"
            )
        if namespace and self.namespace and namespace != self.namespace:
            return f"this codec server holds keys for namespace {self.namespace!r}, not {namespace!r}"
        return None

    async def transform(self, action: str, body: bytes) -> bytes:
        """Encode or decode a Payloads JSON body; ValueError for anything the client sent wrong."""
        payloads = list(json_format.Parse(body, Payloads()).payloads)
        step = self._encode if action == "encode" else self._decode
        result = Payloads(payloads=await step(payloads))
        return json_format.MessageToJson(result, indent=None).encode()

    async def _encode(self, payloads: list[Payload]) -> list[Payload]:
        """As the workers' data converter: encrypt, then offload what is large."""
        return await encode_payloads(self.converter, payloads)

    async def _decode(self, payloads: list[Payload]) -> list[Payload]:
        """As the workers' data converter: resolve offloaded payloads, then decrypt. A blob this
        server cannot read is answered with its reference, so the rest still shows."""
        return [await self._decode_one(p) for p in payloads]

    async def _decode_one(self, payload: Payload) -> Payload:
        try:
            [decoded] = await decode_payloads(self.converter, [payload])
        except OffloadedPayloadError as exc:
            log.warning("%s", exc)
            return payload
        return decoded

    async def _handle(self, request: Request) -> Response:
        log.debug("%s %s", request.method, request.url.path)  # the request line: never a header
        refused = self.guard.check(request.method, request.headers)
        if refused:
            return self._reply(request, refused.status, refused.reason.encode() + b"\n")
        if request.method == "OPTIONS":  # CORS preflight from the Web UI
            return self._reply(request, 204, b"", preflight=True)
        if request.method != "POST":
            return self._reply(request, 405, USAGE.encode())
        segments = [s for s in request.url.path.split("/") if s]
        action = segments[-1] if segments else ""
        if action not in ("encode", "decode"):
            return self._reply(request, 404, USAGE.encode())
        namespace = request.headers.get("X-Namespace") or (segments[-2] if len(segments) > 1 else None)
        refusal = self.refusal(action, namespace)
        if refusal:
            return self._reply(request, 403, refusal.encode() + b"\n")
        try:
            body = await self.transform(action, await request.body())
        except (json_format.ParseError, CodecKeyError, ValueError) as exc:
            return self._reply(request, 400, f"{action} failed: {exc}\n".encode())
        return self._reply(request, 200, body, content_type="application/json")

    def _refused(self, refusal: Refusal) -> ASGIApp:
        async def answer(scope: Scope, receive: Receive, send: Send) -> None:
            response = self._reply(Request(scope), refusal.status, refusal.reason.encode() + b"\n")
            await response(scope, receive, send)

        return answer

    def _reply(
        self, request: Request, status: int, body: bytes, content_type: str = "text/plain", preflight: bool = False
    ) -> Response:
        headers = {}
        origin = request.headers.get("Origin")
        if origin is not None and self.guard.allows_origin(origin):
            headers.update({"Access-Control-Allow-Origin": origin, "Access-Control-Allow-Credentials": "true"})
            headers["Vary"] = "Origin"
            if preflight:
                headers["Access-Control-Allow-Methods"] = "POST, OPTIONS"
                headers["Access-Control-Allow-Headers"] = ALLOWED_HEADERS
        return Response(body, status_code=status, headers=headers, media_type=content_type if body else None)


def main(args: argparse.Namespace) -> int:
    """Serve until SIGINT or SIGTERM; keys, artifact store and namespace from the environment."""
    from ratchet.ops.logs import configure_logging
    from ratchet.ops.settings import SettingsError, load_settings, mask_url
    from ratchet.payloads.converter import data_converter

    origins = tuple(o.strip() for o in args.cors_origin.split(",") if o.strip())
    hosts = tuple(h.strip() for h in args.allowed_host.split(",") if h.strip())
    try:
        settings = load_settings()
        configure_logging(settings)
        converter = data_converter(settings)
        token = settings.codec_token.get_secret_value() if settings.codec_token else None
        server = CodecServer(
            converter, args.host, args.port, origins, settings.temporal_namespace, hosts, token, encode=args.encode
        )
    except (SettingsError, GuardSettingsError) as exc:
        print(f"ratchet codec-server: {exc}", flush=True)
        return 2
    codec = converter.payload_codec
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    with server:
        keys = (
            f"keys {', '.join(codec.key_ids)}; encrypting with {codec.current!r}"
            if isinstance(codec, EncryptionCodec)
            else "no encryption"
        )
        offload = (
            f"offloading payloads over {settings.claim_check_bytes} bytes"
            if settings.claim_check_bytes
            else "offload off"
        )
        guard = server.guard
        print(
            f"ratchet codec server on {server.url} for namespace {settings.temporal_namespace!r} "
            f"({keys}; {offload}; offloaded payloads from {mask_url(settings.artifact_store_url)}; "
            f"CORS {', '.join(sorted(guard.allowed_origins)) or 'off'}; "
            f"hosts {', '.join(sorted(guard.allowed_hosts))}; "
            f"token {'required' if guard.token else 'off'}; encode {'on' if server.encode else 'off'})",
            flush=True,
        )
        while not stop.wait(0.5):
            pass
    return 0
