"""S3ArtifactStore against a real S3-compatible server (SeaweedFS, tests/s3_server.py): the
ArtifactStore conformance suite (ratchet/testing/stores.py), then what only S3 has: the start-up
check behind RATCHET_ARTIFACT_URL, prefixes, round trips, and the server answers the store must
handle (stubbed)."""

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
from botocore.credentials import Credentials

from ratchet.contracts import ArtifactRef
from ratchet.stores import s3_client
from ratchet.ops.settings import SettingsError
from ratchet.stores.artifacts import ArtifactMissing
from ratchet.stores.s3_artifacts import S3ArtifactStore, S3StoreError
from ratchet.stores.s3_client import EMPTY_SHA256, S3Client, canonical_query, sign, signing_key
from ratchet.testing.stores import ArtifactStoreConformance

if TYPE_CHECKING:
    from tests.s3_server import SeaweedS3

pytest_plugins = ("tests.s3_server",)  # the session fixture `s3_server`


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
        partial(S3ArtifactStore.from_url, _url(s3, prefix)), partial(_tamper, s3.client(), s3.bucket, prefix)
    ).run(check)


def test_blobs_live_at_prefix_fan_out_digest(s3: SeaweedS3):
    prefix = _prefix("layout")
    store = S3ArtifactStore.from_url(_url(s3, prefix) + "/")
    ref = store.put(b"x" * 1000)
    store.put(b"x" * 1000, "text/plain")
    assert store.key(ref.digest) == f"{prefix}/{ref.digest[:2]}/{ref.digest}"
    assert _keys(s3, prefix) == [f"{prefix}/{ref.digest[:2]}/{ref.digest}"]
    whole_bucket = S3ArtifactStore.from_url(f"s3://{s3.bucket}")
    assert whole_bucket.key(ref.digest) == f"{ref.digest[:2]}/{ref.digest}"


def test_prefixes_in_one_bucket_do_not_see_each_others_blobs(s3: SeaweedS3):
    base = _prefix("isolation")
    first, second = (S3ArtifactStore.from_url(_url(s3, p)) for p in (base, f"{base}-other"))
    data = f"{base} only in the first".encode()
    ref = first.put(data)
    with pytest.raises(ArtifactMissing) as missing:
        second.get(ref)
    assert ref.digest in str(missing.value) and s3.bucket in str(missing.value)
    assert _keys(s3, f"{base}-other") == []
    second.put(data)
    assert first.get(ref) == second.get(ref) == data
    assert _keys(s3, base) == [first.key(ref.digest)] and _keys(s3, f"{base}-other") == [second.key(ref.digest)]


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
        """Client to server, a request at a time: its head, then Content-Length bytes of body."""
        while head := b"".join(iter(reader.readline, b"\r\n")):
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
        store = S3ArtifactStore.from_url(_url(s3, _prefix("round-trips")))
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
        store = S3ArtifactStore.from_url(_url(s3, _prefix("no-continue")))
        data = b"a blob sent with its head"
        assert proxy.methods(lambda: store.put(data)) == ["PUT"]
        head = proxy.heads[0].lower()
        assert b"\r\nexpect:" not in head
        assert f"x-amz-content-sha256: {hashlib.sha256(data).hexdigest()}".encode() in head
        assert b"x-amz-checksum-sha256;" in head or b"x-amz-checksum-sha256," in head, "the checksum is signed"
    finally:
        proxy.close()


# --- from_url: a worker fails at start -----------------------------------------------------------


def _from_url_fails(url: str, *needles: str) -> SettingsError:
    began = time.monotonic()
    with pytest.raises(SettingsError) as failed:
        S3ArtifactStore.from_url(url)
    message = str(failed.value)
    assert "RATCHET_ARTIFACT_URL" in message, message
    for needle in needles:
        assert needle in message, f"{needle!r} not in: {message}"
    assert time.monotonic() - began < 10, f"took {time.monotonic() - began:.1f}s to fail"
    return failed.value


def test_from_url_missing_bucket(s3: SeaweedS3):
    _from_url_fails("s3://ratchet-no-such-bucket/p", "ratchet-no-such-bucket", "does not exist", s3.endpoint)


def test_from_url_wrong_secret_key(s3: SeaweedS3, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    _from_url_fails(_url(s3, "p"), "rejected the credentials", "AWS_SECRET_ACCESS_KEY")


def test_from_url_unknown_access_key(s3: SeaweedS3, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "nobody")
    _from_url_fails(_url(s3, "p"), "AWS_ACCESS_KEY_ID")


def test_from_url_unreachable_endpoint(s3: SeaweedS3, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(s3_client, "UNREACHABLE_WAIT_S", 1.0)  # the worker waits 10 s for a store to answer
    dead = f"http://127.0.0.1:{_free_port()}"
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", dead)
    _from_url_fails(_url(s3, "p"), "cannot reach", dead, "AWS_ENDPOINT_URL")


def test_from_url_honours_aws_endpoint_url_and_default_region(s3: SeaweedS3, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3")
    monkeypatch.delenv("AWS_REGION")
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3.endpoint)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    store = S3ArtifactStore.from_url(_url(s3, _prefix("generic-endpoint")))
    assert store.endpoint == s3.endpoint and store.client.region == "eu-west-1"
    assert store.get(store.put(b"via AWS_ENDPOINT_URL")) == b"via AWS_ENDPOINT_URL"


@pytest.mark.parametrize("url", [
    "", "bucket/prefix", "file:///tmp/artifacts", "s3://", "s3:///prefix", "s3://b/prefix",
    "s3://user:secret@bucket/p", "s3://bucket:9000/p", "s3://bucket/p?region=eu", "s3://bucket/p#x",
    "s3://bucket/a//b", "s3://bucket/a/../b", "s3://bucket/./a", "s3://bu cket/p", "s3://bucket/a\nb", "s3://[bucket/p",
])
def test_from_url_rejects_a_malformed_url_without_a_request(url: str, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", f"http://127.0.0.1:{_free_port()}")  # nothing would answer
    began = time.monotonic()
    with pytest.raises(SettingsError, match="RATCHET_ARTIFACT_URL") as failed:
        S3ArtifactStore.from_url(url)
    assert time.monotonic() - began < 1
    assert "secret" not in str(failed.value), "a secret in the URL is not echoed"


def test_a_restarted_server_is_used_again_through_the_same_store(tmp_path, monkeypatch: pytest.MonkeyPatch):
    """Down: a call raises S3StoreError (retryable) within seconds. Back on the same address: the
    same store's next call works (its pooled connections to the old process are replaced)."""
    from tests.s3_server import SeaweedS3

    with SeaweedS3(tmp_path / "weed") as server:
        for name, value in server.env().items():
            monkeypatch.setenv(name, value)
        store = S3ArtifactStore.from_url(_url(server, "restart"))
        store.client.unreachable_wait_s = 1.0  # 10 s by default: a restart is waited out
        before = store.put(b"before the outage")
        server.stop()
        began = time.monotonic()
        with pytest.raises(S3StoreError, match="no answer"):
            store.put(b"during the outage")
        assert time.monotonic() - began < 4
        server.start_again()
        assert store.get(before) == b"before the outage"
        assert store.get(store.put(b"after the outage")) == b"after the outage"


# --- answers a real server rarely gives: a scripted server ------------------------------------------


class _Scripted:
    """An HTTP server that answers each request with the next scripted (status, S3 error code)
    (200 and an empty body for None) and records (method, path)."""

    def __init__(self, *answers: tuple[int, str] | None, port: int = 0) -> None:
        import http.server

        self.answers, self.requests = list(answers), []
        scripted = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as S3

            def answer(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                scripted.requests.append((self.command, self.path))
                status, code = scripted.answers.pop(0) or (200, "")
                body = f"<Error><Code>{code}</Code><Message>scripted</Message></Error>".encode() if code else b""
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            do_GET = do_PUT = do_HEAD = answer

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True).start()
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"

    def store(self) -> S3ArtifactStore:
        return S3ArtifactStore("bucket", "p", client=S3Client(self.endpoint, "us-east-1", Credentials("k", "s")))

    def methods(self) -> list[str]:
        return [method for method, _ in self.requests]

    def __enter__(self) -> _Scripted:
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        assert not self.answers, f"answers left unasked: {self.answers}"


def test_a_failing_server_is_tried_three_times_then_the_call_raises():
    """5xx: three attempts in all, with backoff, then the call raises S3StoreError (and the
    activity's own retry policy takes over)."""
    unavailable = (503, "ServiceUnavailable")
    with _Scripted(unavailable, unavailable, unavailable) as server:
        began = time.monotonic()
        with pytest.raises(S3StoreError, match="ServiceUnavailable.*HTTP 503"):
            server.store().get(ArtifactRef(digest=hashlib.sha256(b"x").hexdigest()))
        assert server.methods() == ["GET"] * 3 and time.monotonic() - began < 2


def test_throttling_is_retried_and_a_later_success_returned():
    with _Scripted((503, "SlowDown"), (500, "InternalError"), None) as server:
        assert server.store().put(b"slowly").size == 6
        assert server.methods() == ["PUT"] * 3


def test_a_refused_connection_is_asked_again_for_the_wait_then_names_the_endpoint():
    dead = f"http://127.0.0.1:{_free_port()}"
    client = S3Client(dead, "us-east-1", Credentials("k", "s"), unreachable_wait_s=1.5)
    store = S3ArtifactStore("bucket", "p", client=client)
    began = time.monotonic()
    with pytest.raises(S3StoreError, match=f"get of s3://bucket/p/.* at {dead} failed: no answer .*Connection"):
        store.get(ArtifactRef(digest=hashlib.sha256(b"x").hexdigest()))
    assert 1.5 <= time.monotonic() - began < 4, "asked again for the wait, then given up"


def test_a_store_that_comes_back_within_the_wait_is_answered():
    """A restart of the store (no answer for a while) costs the request time, not an error."""
    port = _free_port()
    client = S3Client(f"http://127.0.0.1:{port}", "us-east-1", Credentials("k", "s"), unreachable_wait_s=10)
    store = S3ArtifactStore("bucket", "p", client=client)
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
        store = server.store()
        store.put(b"first")
        assert store.conditional_put is False
        store.put(b"second")  # HEAD answered 200: the blob exists, nothing uploaded
        assert server.methods() == ["PUT", "HEAD", "PUT", "HEAD"]


def test_other_errors_raise_naming_the_key_and_endpoint():
    with _Scripted((403, "AccessDenied"), (400, "InvalidRequest")) as server:
        store, digest = server.store(), hashlib.sha256(b"x").hexdigest()
        with pytest.raises(S3StoreError, match=f"s3://bucket/p/{digest[:2]}/{digest}.*AccessDenied.*ListBucket"):
            store.get(ArtifactRef(digest=digest))
        with pytest.raises(S3StoreError, match=f"put of s3://bucket/p/.* at {server.endpoint} .*InvalidRequest"):
            store.put(b"x")


def test_no_credentials_is_an_error_naming_the_variables(s3: SeaweedS3):
    store = S3ArtifactStore(s3.bucket, "p", client=S3Client(s3.endpoint, "us-east-1", None))
    with pytest.raises(SettingsError, match="RATCHET_ARTIFACT_URL.*no AWS credentials.*AWS_ACCESS_KEY_ID"):
        store.check()
    with pytest.raises(S3StoreError, match="no AWS credentials"):
        store.put(b"x")


# --- the signature and the address ---------------------------------------------------------------


def test_the_signature_is_aws_s3_example():
    """AWS's worked example of a SigV4-signed S3 GetObject (the S3 API reference, "Examples:
    Signature Calculations": examplebucket, GET /test.txt with a Range header)."""
    secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
    authorization = sign("GET", "examplebucket.s3.amazonaws.com", "/test.txt", "", {"range": "bytes=0-9"},
                         EMPTY_SHA256, "AKIAIOSFODNN7EXAMPLE", signing_key(secret, "20130524", "us-east-1"),
                         "us-east-1", "20130524T000000Z")
    assert authorization == (
        "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
        "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
        "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"
    )


def test_the_signature_matches_botocore_for_a_listing_with_a_session_token():
    """A query string with characters to encode and a session token, signed here and by botocore."""
    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest

    query = {"list-type": "2", "prefix": "runs/a b+c/", "continuation-token": "x/y=="}
    theirs = AWSRequest("GET", "http://127.0.0.1:9000/bucket", params=query,
                        headers={"X-Amz-Content-SHA256": EMPTY_SHA256})
    auth = S3SigV4Auth(Credentials("AKID", "secret", "token"), "s3", "eu-west-1")
    auth.add_auth(theirs)
    client = S3Client("http://127.0.0.1:9000", "eu-west-1", Credentials("AKID", "secret", "token"))
    ours = client.signed_headers("GET", "127.0.0.1:9000", "/bucket", canonical_query(query), {}, EMPTY_SHA256,
                                 theirs.headers["X-Amz-Date"])
    assert ours["authorization"] == theirs.headers["Authorization"]
    assert ours["x-amz-security-token"] == "token"


def test_aws_buckets_are_addressed_virtual_hosted_unless_their_name_has_a_dot():
    client = S3Client(None, "eu-west-1", Credentials("k", "s"))
    assert client.endpoint == "https://s3.eu-west-1.amazonaws.com"
    assert client.url("my-bucket", "p/ab/cd") == "https://my-bucket.s3.eu-west-1.amazonaws.com/p/ab/cd"
    assert client.url("my.bucket", "k") == "https://s3.eu-west-1.amazonaws.com/my.bucket/k"
    other = S3Client("http://127.0.0.1:9000/", "us-east-1", Credentials("k", "s"))
    assert other.url("my-bucket", "a key+") == "http://127.0.0.1:9000/my-bucket/a%20key%2B"
