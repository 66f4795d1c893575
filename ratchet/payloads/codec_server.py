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
is sent with the workers' key, so the worker would accept it as genuine.

The server transforms payloads with the workers' data converter (`data_converter(settings)`,
ratchet/payloads/converter.py), values untouched: decoding resolves offloaded payloads (the SDK's
external-storage references, ratchet/payloads/offload.py) from the artifact store at
RATCHET_ARTIFACT_DIR, then decrypts, so the UI shows a large tool output or state, not its
reference; encoding encrypts, then offloads what is large.

Anyone who can reach this server and passes those rules can decrypt.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import socketserver
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from google.protobuf import json_format
from temporalio.api.common.v1 import Payload, Payloads
from temporalio.converter import DataConverter

from ratchet.payloads.codec import CodecKeyError, EncryptionCodec
from ratchet.ops.http_guard import GuardSettingsError, HttpGuard, Refusal
from ratchet.payloads.converter import decode_payloads, encode_payloads
from ratchet.payloads.offload import OffloadedPayloadError

log = logging.getLogger("ratchet.payloads.codec_server")
MAX_BODY_BYTES = 64 * 1024 * 1024
ALLOWED_HEADERS = "X-Namespace, Content-Type, Authorization"
TOKEN_SETTING = "RATCHET_CODEC_TOKEN"


class CodecServer:
    """The codec HTTP server in a daemon thread; `with CodecServer(...) as server:`.

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
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> CodecServer:
        self._httpd = _Server((self.host, self.port), _Handler)
        self._httpd.owner = self
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="codec-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        httpd, self._httpd = self._httpd, None
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()

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

    def transform(self, action: str, body: bytes) -> bytes:
        """Encode or decode a Payloads JSON body; ValueError for anything the client sent wrong."""
        payloads = list(json_format.Parse(body, Payloads()).payloads)
        step = self._encode if action == "encode" else self._decode
        result = Payloads(payloads=asyncio.run(step(payloads)))  # a request thread: no loop runs here
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


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: CodecServer

    def server_bind(self) -> None:
        socketserver.TCPServer.server_bind(self)  # skip HTTPServer's getfqdn(), slow without DNS


class _Handler(BaseHTTPRequestHandler):
    server_version = "ratchet-codec/1.0"
    sys_version = ""
    protocol_version = "HTTP/1.1"

    @property
    def owner(self) -> CodecServer:
        server = self.server
        assert isinstance(server, _Server)
        return server.owner

    def do_OPTIONS(self) -> None:  # noqa: N802  (CORS preflight from the Web UI)
        refused = self.owner.guard.check("OPTIONS", self.headers)
        if refused:
            return self._refuse(refused)
        self._reply(204, b"", preflight=True)

    def do_GET(self) -> None:  # noqa: N802
        refused = self.owner.guard.check("GET", self.headers)
        self._refuse(refused) if refused else self._reply(405, b"POST .../encode or .../decode\n")

    def do_POST(self) -> None:  # noqa: N802
        refused = self.owner.guard.check("POST", self.headers)
        if refused:
            return self._refuse(refused)
        segments = [s for s in self.path.split("?")[0].split("/") if s]
        action = segments[-1] if segments else ""
        if action not in ("encode", "decode"):
            return self._reply(404, b"POST .../encode or .../decode\n")
        namespace = self.headers.get("X-Namespace") or (segments[-2] if len(segments) > 1 else None)
        refusal = self.owner.refusal(action, namespace)
        if refusal:
            return self._reply(403, refusal.encode() + b"\n")
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY_BYTES:
            return self._reply(413, f"body over {MAX_BODY_BYTES} bytes\n".encode())
        try:
            body = self.owner.transform(action, self.rfile.read(length))
        except (json_format.ParseError, CodecKeyError, ValueError) as exc:
            return self._reply(400, f"{action} failed: {exc}\n".encode())
        self._reply(200, body, content_type="application/json")

    def _refuse(self, refused: Refusal) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if 0 < length <= MAX_BODY_BYTES:
            self.rfile.read(length)  # unread, it would reset the connection under a client still sending it
        else:
            self.close_connection = True
        self._reply(refused.status, refused.reason.encode() + b"\n")

    def _reply(self, status: int, body: bytes, content_type: str = "text/plain", preflight: bool = False) -> None:
        self.send_response(status)
        origin = self.headers.get("Origin")
        if origin is not None and self.owner.guard.allows_origin(origin):
            self.send_header("Access-Control-Allow-Origin", origin)
            self.send_header("Access-Control-Allow-Credentials", "true")
            self.send_header("Vary", "Origin")
            if preflight:
                self.send_header("Access-Control-Allow-Methods", "POST, OPTIONS")
                self.send_header("Access-Control-Allow-Headers", ALLOWED_HEADERS)
        if body:
            self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002  (the request line: never a header)
        log.debug("%s " + format, self.address_string(), *args)


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
