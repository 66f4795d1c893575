"""ObjectArtifactStore on S3, against a real S3-compatible server (SeaweedFS, tests/s3_server.py):
the ArtifactStore conformance suite (ratchet/testing/stores.py), then what only a remote store has:
the start-up check behind RATCHET_ARTIFACT_URL, prefixes, round trips, proxies, and the server
answers the store must handle (scripted)."""

from __future__ import annotations

import hashlib
import re
import socket
import threading
import time
import uuid
from functools import partial
from typing import TYPE_CHECKING, Any

import pytest

from ratchet.contracts import ArtifactRef
from ratchet.ops.settings import SettingsError
from ratchet.stores.artifacts import ArtifactMissing
from ratchet.stores.object_artifacts import Location, ObjectArtifactStore, ObjectStoreError, open_object_store
from ratchet.testing.stores import ArtifactStoreConformance

pytestmark = pytest.mark.e2e  # processes as a user runs them: `make test-e2e`, not `make test`

if TYPE_CHECKING:
    from tests.s3_server import SeaweedS3


@pytest.fixture
def s3(s3_server: SeaweedS3, monkeypatch: pytest.MonkeyPatch) -> SeaweedS3:
    """The server, with the AWS variables pointing at it (spawned processes inherit them)."""
    for name in ("AWS_ENDPOINT_URL", "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    for name, value in s3_server.env().items():
        monkeypatch.setenv(name, value)
    return s3_server


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _url(server: SeaweedS3, prefix: str) -> str:
    return f"s3://{server.bucket}/{prefix}"


def _prefix(what: str) -> str:
    return f"{what}/{uuid.uuid4().hex[:12]}"


def _tamper(client: Any, bucket: str, prefix: str, digest: str, data: bytes) -> None:
    client.put_object(Bucket=bucket, Key=f"{prefix}/{digest[:2]}/{digest}", Body=data)


def _keys(server: SeaweedS3, prefix: str) -> list[str]:
    listing = server.client().list_objects_v2(Bucket=server.bucket, Prefix=f"{prefix}/")
    return sorted(item["Key"] for item in listing.get("Contents", []))


@pytest.mark.parametrize("check", ArtifactStoreConformance.checks())
def test_conformance(check: str, s3: SeaweedS3):
    prefix = _prefix("conformance")
    ArtifactStoreConformance(
        partial(ObjectArtifactStore.from_url, _url(s3, prefix)), partial(_tamper, s3.client(), s3.bucket, prefix)
    ).run(check)


def test_blobs_live_at_prefix_fan_out_digest(s3: SeaweedS3):
    prefix = _prefix("layout")
    store = ObjectArtifactStore.from_url(_url(s3, prefix) + "/")
    ref = store.put(b"x" * 1000)
    store.put(b"x" * 1000, "text/plain")
    assert store.key(ref.digest) == f"{prefix}/{ref.digest[:2]}/{ref.digest}"
    assert _keys(s3, prefix) == [f"{prefix}/{ref.digest[:2]}/{ref.digest}"]
    whole_bucket = ObjectArtifactStore.from_url(f"s3://{s3.bucket}")
    assert whole_bucket.key(ref.digest) == f"{ref.digest[:2]}/{ref.digest}"


def test_prefixes_in_one_bucket_do_not_see_each_others_blobs(s3: SeaweedS3):
    base = _prefix("isolation")
    first, second = (ObjectArtifactStore.from_url(_url(s3, p)) for p in (base, f"{base}-other"))
    data = f"{base} only in the first".encode()
    ref = first.put(data)
    with pytest.raises(ArtifactMissing) as missing:
        second.get(ref)
    assert ref.digest in str(missing.value) and s3.bucket in str(missing.value)
    assert _keys(s3, f"{base}-other") == []
    second.put(data)
    assert first.get(ref) == second.get(ref) == data
    assert _keys(s3, base) == [first.key(ref.digest)] and _keys(s3, f"{base}-other") == [second.key(ref.digest)]


def _head(reader: Any) -> bytes:
    """A request's head, up to the blank line; empty once the connection has closed (readline
    returns b"" from then on: reading to a blank line alone would spin there, eating a core)."""
    lines = []
    while (line := reader.readline()) not in (b"\r\n", b""):
        lines.append(line)
    return b"".join(lines)


class _RecordingProxy:
    """A TCP proxy in front of the real server that records each request's method and path (the
    bytes go through unchanged), so a test sees the requests a store call puts on the wire."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.requests: list[tuple[str, str]] = []
        self.heads: list[bytes] = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            threading.Thread(target=self._requests, args=(client.makefile("rb"), upstream), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client), daemon=True).start()

    def _requests(self, reader: Any, upstream: socket.socket) -> None:
        """Client to server, a request at a time: its head, then Content-Length bytes of body; until
        the client closes the connection."""
        while head := _head(reader):
            method, path, _ = head.split(b"\r\n", 1)[0].decode().split(" ", 2)
            self.requests.append((method, path))
            self.heads.append(head)
            length = re.search(rb"(?im)^content-length:\s*(\d+)", head)
            upstream.sendall(head + b"\r\n" + (reader.read(int(length[1])) if length else b""))
        upstream.close()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        while data := source.recv(65536):
            sink.sendall(data)
        sink.close()

    def methods(self, call: Any) -> list[str]:
        self.requests.clear()
        self.heads.clear()
        call()
        return [method for method, _ in self.requests]

    def close(self) -> None:
        self.listener.close()


def test_round_trips_per_operation(s3: SeaweedS3, monkeypatch: pytest.MonkeyPatch):
    proxy = _RecordingProxy(s3.ports["s3"])
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", f"http://127.0.0.1:{proxy.port}")
    try:
        store = ObjectArtifactStore.from_url(_url(s3, _prefix("round-trips")))
        small, large = b"small blob", b"L" * 4096
        store.head_first_bytes = 1024
        assert proxy.methods(lambda: store.put(small)) == ["PUT"], "a new small blob: one conditional PUT"
        assert proxy.methods(lambda: store.put(small)) == ["PUT"], "an existing small blob: one PUT, answered 412"
        assert proxy.methods(lambda: store.get(ArtifactRef(digest=hashlib.sha256(small).hexdigest()))) == ["GET"]
        assert proxy.methods(lambda: store.put(large)) == ["HEAD", "PUT"], "a new large blob: HEAD, then PUT"
        assert proxy.methods(lambda: store.put(large)) == ["HEAD"], "an existing large blob is not uploaded again"
        assert proxy.methods(lambda: list(store.digests())) == ["GET"], "a listing of two blobs: one LIST"
        assert "list-type=2" in proxy.requests[0][1]
        with pytest.raises(ValueError):
            proxy.methods(lambda: store.get(ArtifactRef(digest="../" + "a" * 61)))
        assert proxy.requests == [], "a malformed digest is rejected before any request"
        assert proxy.methods(store.check) == ["GET"], "the start-up check is one GET"
    finally:
        proxy.close()


def test_a_put_is_one_request_without_100_continue(s3: SeaweedS3, monkeypatch: pytest.MonkeyPatch):
    """boto3 sends `Expect: 100-continue` with every PUT and waits for the server's go-ahead before
    the body: a round trip per put. The store sends head and body at once, the sha256 signed in."""
    proxy = _RecordingProxy(s3.ports["s3"])
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", f"http://127.0.0.1:{proxy.port}")
    try:
        store = ObjectArtifactStore.from_url(_url(s3, _prefix("no-continue")))
        data = b"a blob sent with its head"
        assert proxy.methods(lambda: store.put(data)) == ["PUT"]
        head = proxy.heads[0].lower()
        assert b"\r\nexpect:" not in head
        assert f"x-amz-content-sha256: {hashlib.sha256(data).hexdigest()}".encode() in head
        assert b"x-amz-checksum-sha256;" in head or b"x-amz-checksum-sha256," in head, "the checksum is signed"
    finally:
        proxy.close()


def test_an_http_proxy_in_the_environment_is_used(s3: SeaweedS3, monkeypatch: pytest.MonkeyPatch):
    """HTTP_PROXY / HTTPS_PROXY / NO_PROXY as curl reads them (obstore's HTTP client honours them):
    the requests reach the server through the proxy, in a proxy's absolute form."""
    proxy = _RecordingProxy(s3.ports["s3"])
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
    try:
        store = ObjectArtifactStore.from_url(_url(s3, _prefix("proxied")))
        assert proxy.methods(lambda: store.get(store.put(b"through the proxy"))) == ["PUT", "GET"]
        assert all(path.startswith(f"{s3.endpoint}/{s3.bucket}/") for _, path in proxy.requests), proxy.requests
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        direct = ObjectArtifactStore.from_url(_url(s3, _prefix("direct")))
        assert proxy.methods(lambda: direct.put(b"not through the proxy")) == []
    finally:
        proxy.close()


# --- from_url: a worker fails at start -----------------------------------------------------------


def _from_url_fails(url: str, *needles: str, **config: Any) -> SettingsError:
    began = time.monotonic()
    with pytest.raises(SettingsError) as failed:
        ObjectArtifactStore.from_url(url, **config)
    message = str(failed.value)
    assert "RATCHET_ARTIFACT_URL" in message, message
    for needle in needles:
        assert needle in message, f"{needle!r} not in: {message}"
    assert time.monotonic() - began < 10, f"took {time.monotonic() - began:.1f}s to fail"
    return failed.value


def test_from_url_missing_bucket(s3: SeaweedS3):
    _from_url_fails("s3://ratchet-no-such-bucket/p", "bucket 'ratchet-no-such-bucket' does not exist", s3.endpoint)


def test_a_bucket_gone_after_start_is_named(s3: SeaweedS3):
    """A put is a retryable ObjectStoreError, a get an ArtifactMissing, each naming the bucket."""
    location = Location("s3", "ratchet-gone-bucket", "p")
    store = ObjectArtifactStore(location, open_object_store(location))
    with pytest.raises(ObjectStoreError, match=r"S3 put of s3://ratchet-gone-bucket/p/.* failed: NoSuchBucket \(HTTP 404\)"):
        store.put(b"nowhere")
    with pytest.raises(ArtifactMissing, match="bucket 'ratchet-gone-bucket' does not exist"):
        store.get(ArtifactRef(digest=hashlib.sha256(b"nowhere").hexdigest()))


def test_from_url_wrong_secret_key(s3: SeaweedS3, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    _from_url_fails(_url(s3, "p"), "rejected the credentials in AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (SignatureDoesNotMatch)")


def test_from_url_unknown_access_key(s3: SeaweedS3, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "nobody")
    _from_url_fails(_url(s3, "p"), "rejected the credentials", "AWS_ACCESS_KEY_ID")


def test_from_url_unreachable_endpoint(s3: SeaweedS3, monkeypatch: pytest.MonkeyPatch):
    dead = f"http://127.0.0.1:{_free_port()}"
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", dead)
    _from_url_fails(_url(s3, "p"), "cannot reach", dead, "Connection refused", "AWS_ENDPOINT_URL",
                    retry_timeout_s=1.0)  # a worker waits 10 s for a store to answer


def test_from_url_without_credentials_names_them(s3: SeaweedS3, monkeypatch: pytest.MonkeyPatch):
    """No keys in the environment: obstore asks the instance metadata service (here a dead port)."""
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    metadata = f"http://127.0.0.1:{_free_port()}"
    _from_url_fails(_url(s3, "p"), "no S3 credentials", metadata, "AWS_ACCESS_KEY_ID",
                    metadata_endpoint=metadata, retry_timeout_s=1.0)


def test_from_url_honours_aws_endpoint_url_and_default_region(s3: SeaweedS3, monkeypatch: pytest.MonkeyPatch):
    """AWS_ENDPOINT_URL when AWS_ENDPOINT_URL_S3 is unset (and the latter first when both are), the
    region of AWS_DEFAULT_REGION when AWS_REGION is unset (in the signature's scope)."""
    proxy = _RecordingProxy(s3.ports["s3"])
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3")
    monkeypatch.delenv("AWS_REGION")
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{proxy.port}")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    try:
        store = ObjectArtifactStore.from_url(_url(s3, _prefix("generic-endpoint")))
        assert proxy.methods(lambda: store.get(store.put(b"via AWS_ENDPOINT_URL"))) == ["PUT", "GET"]
        assert b"/eu-west-1/s3/aws4_request" in proxy.heads[0]
        monkeypatch.setenv("AWS_ENDPOINT_URL_S3", s3.endpoint)
        direct = ObjectArtifactStore.from_url(_url(s3, _prefix("specific-endpoint")))
        assert proxy.methods(lambda: direct.put(b"via AWS_ENDPOINT_URL_S3")) == []
    finally:
        proxy.close()


@pytest.mark.parametrize("url", [
    "", "bucket/prefix", "file:///tmp/artifacts", "s3://", "s3:///prefix", "s3://b/prefix",
    "s3://user:secret@bucket/p", "s3://bucket:9000/p", "s3://bucket/p?region=eu", "s3://bucket/p#x",
    "s3://bucket/a//b", "s3://bucket/a/../b", "s3://bucket/./a", "s3://bu cket/p", "s3://bucket/a\nb", "s3://[bucket/p",
    "gs://", "gs://b/p", "gs://user:secret@bucket/p", "az://", "az://Upper/p", "az://two--hyphens", "az://c/a//b",
    "http://bucket/p",
])
def test_from_url_rejects_a_malformed_url_without_a_request(url: str, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", f"http://127.0.0.1:{_free_port()}")  # nothing would answer
    began = time.monotonic()
    with pytest.raises(SettingsError, match="RATCHET_ARTIFACT_URL") as failed:
        ObjectArtifactStore.from_url(url)
    assert time.monotonic() - began < 1
    assert "secret" not in str(failed.value), "a secret in the URL is not echoed"


def test_a_restarted_server_is_used_again_through_the_same_store(tmp_path, monkeypatch: pytest.MonkeyPatch):
    """Down: a call raises ObjectStoreError (retryable) within seconds. Back on the same address: the
    same store's next call works (its pooled connections to the old process are replaced)."""
    from tests.s3_server import SeaweedS3

    with SeaweedS3(tmp_path / "weed") as server:
        for name, value in server.env().items():
            monkeypatch.setenv(name, value)
        store = ObjectArtifactStore.from_url(_url(server, "restart"), retry_timeout_s=1.0)  # 10 s: waited out
        before = store.put(b"before the outage")
        server.stop()
        began = time.monotonic()
        with pytest.raises(ObjectStoreError, match="no answer"):
            store.put(b"during the outage")
        assert time.monotonic() - began < 4
        server.start_again()
        assert store.get(before) == b"before the outage"
        assert store.get(store.put(b"after the outage")) == b"after the outage"


# --- answers a real server rarely gives: a scripted server ------------------------------------------


class _Scripted:
    """An HTTP server that answers each request with the next scripted (status, S3 error code)
    (200, an ETag and an empty body for None), then `rest` to any request beyond the script, and
    records (method, path)."""

    def __init__(self, *answers: tuple[int, str] | None, rest: tuple[int, str] | None = None, port: int = 0) -> None:
        import http.server

        self.answers, self.rest, self.requests = list(answers), rest, []
        scripted = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as S3

            def answer(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                scripted.requests.append((self.command, self.path))
                status, code = (scripted.answers.pop(0) if scripted.answers else scripted.rest) or (200, "")
                body = f"<Error><Code>{code}</Code><Message>scripted</Message></Error>".encode() if code else b""
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("ETag", '"scripted"')
                self.send_header("Last-Modified", "Tue, 01 Dec 2026 00:00:00 GMT")
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            do_GET = do_PUT = do_HEAD = answer

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True).start()
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"

    def store(self, **retries: Any) -> ObjectArtifactStore:
        return _store(self.endpoint, **retries)

    def methods(self) -> list[str]:
        return [method for method, _ in self.requests]

    def __enter__(self) -> _Scripted:
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        assert not self.answers, f"answers left unasked: {self.answers}"


def _store(endpoint: str, **retries: Any) -> ObjectArtifactStore:
    """A store of bucket `bucket`, prefix `p`, at `endpoint`, with static credentials."""
    location = Location("s3", "bucket", "p")
    config = {"endpoint": endpoint, "access_key_id": "k", "secret_access_key": "s", "region": "us-east-1"}
    return ObjectArtifactStore(location, open_object_store(location, **config, **retries))


def test_a_failing_server_is_asked_again_then_the_call_raises():
    """5xx: asked again with backoff (here at most twice), then the call raises ObjectStoreError
    (and the activity's own retry policy takes over)."""
    unavailable = (503, "ServiceUnavailable")
    with _Scripted(unavailable, unavailable, unavailable) as server:
        began = time.monotonic()
        with pytest.raises(ObjectStoreError, match=r"S3 get of s3://bucket/p/.* failed: ServiceUnavailable \(HTTP 503\)"):
            server.store(max_retries=2).get(ArtifactRef(digest=hashlib.sha256(b"x").hexdigest()))
        assert server.methods() == ["GET"] * 3 and time.monotonic() - began < 2


def test_a_failing_server_is_asked_again_for_the_retry_timeout():
    with _Scripted(rest=(500, "InternalError")) as server:
        began = time.monotonic()
        with pytest.raises(ObjectStoreError, match=r"InternalError \(HTTP 500\)"):
            server.store(retry_timeout_s=1.0).put(b"never")
        assert 1.0 <= time.monotonic() - began < 4 and server.methods()[:3] == ["PUT"] * 3


def test_throttling_is_retried_and_a_later_success_returned():
    with _Scripted((503, "SlowDown"), (429, "TooManyRequests"), (500, "InternalError"), None) as server:
        assert server.store().put(b"slowly").size == 6
        assert server.methods() == ["PUT"] * 4


def test_a_refused_connection_is_asked_again_for_the_wait_then_names_the_endpoint():
    dead = f"http://127.0.0.1:{_free_port()}"
    # the wait, not the count, ends it: 10 jittered backoffs once summed to under 1.5 s
    store = _store(dead, retry_timeout_s=1.5, max_retries=100)
    began = time.monotonic()
    with pytest.raises(ObjectStoreError, match=f"get of s3://bucket/p/.* failed: no answer .*Connection refused.*{dead}"):
        store.get(ArtifactRef(digest=hashlib.sha256(b"x").hexdigest()))
    assert 1.5 <= time.monotonic() - began < 4, "asked again for the wait, then given up"


def test_a_store_that_comes_back_within_the_wait_is_answered():
    """A restart of the store (no answer for a while) costs the request time, not an error."""
    port = _free_port()
    store = _store(f"http://127.0.0.1:{port}")
    restarted: list[_Scripted] = []
    timer = threading.Timer(1.0, lambda: restarted.append(_Scripted(None, port=port)))
    timer.start()
    began = time.monotonic()
    try:
        assert store.put(b"after the restart").size == 17
        assert 1.0 <= time.monotonic() - began < 8
    finally:
        timer.join()
        restarted[0].__exit__(None, None, None)


def test_a_concurrent_conditional_put_is_asked_again():
    with _Scripted((409, "ConditionalRequestConflict"), (412, "PreconditionFailed")) as server:
        assert server.store().put(b"raced").digest == hashlib.sha256(b"raced").hexdigest()
        assert server.methods() == ["PUT", "PUT"]


def test_a_server_without_conditional_puts_gets_head_then_put():
    with _Scripted((501, "NotImplemented"), (404, ""), None, None) as server:
        store = server.store(max_retries=0)
        store.put(b"first")
        assert store.conditional_put is False
        store.put(b"second")  # HEAD answered 200: the blob exists, nothing uploaded
        assert server.methods() == ["PUT", "HEAD", "PUT", "HEAD"]


def test_other_errors_raise_naming_the_key_and_url():
    with _Scripted((403, "AccessDenied"), (400, "InvalidRequest")) as server:
        store, digest = server.store(), hashlib.sha256(b"x").hexdigest()
        with pytest.raises(ObjectStoreError, match=f"s3://bucket/p/{digest[:2]}/{digest}.*AccessDenied.*ListBucket"):
            store.get(ArtifactRef(digest=digest))
        with pytest.raises(ObjectStoreError, match=f"put of s3://bucket/p/.* InvalidRequest .*PUT {server.endpoint}/"):
            store.put(b"x")
