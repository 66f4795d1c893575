"""S3ArtifactStore against a real S3-compatible server (SeaweedFS, tests/s3_server.py): the
ArtifactStore conformance suite (ratchet/testing/stores.py), then what only S3 has: the start-up
check behind RATCHET_ARTIFACT_URL, prefixes, round trips, and the server answers the store must
handle (stubbed)."""

from __future__ import annotations

import hashlib
import socket
import time
import uuid
from functools import partial
from typing import TYPE_CHECKING, Any

import pytest

from ratchet.contracts import ArtifactRef
from ratchet.ops.settings import SettingsError
from ratchet.stores.artifacts import ArtifactMissing
from ratchet.stores.s3_artifacts import S3ArtifactStore, S3StoreError
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


def test_round_trips_per_operation(s3: SeaweedS3):
    store = S3ArtifactStore.from_url(_url(s3, _prefix("round-trips")))
    sent: list[str] = []

    def record(request: Any, **_: Any) -> None:
        sent.append(request.method)

    def requests(call: Any) -> list[str]:
        sent.clear()
        call()
        return list(sent)

    small, large = b"small blob", b"L" * 4096
    store.head_first_bytes = 1024
    store.client.meta.events.register("before-send.s3", record)
    try:  # the client is shared by every store opened under the same variables
        assert requests(lambda: store.put(small)) == ["PUT"], "a new small blob: one conditional PUT"
        assert requests(lambda: store.put(small)) == ["PUT"], "an existing small blob: one PUT, answered 412"
        assert requests(lambda: store.get(ArtifactRef(digest=hashlib.sha256(small).hexdigest()))) == ["GET"]
        assert requests(lambda: store.put(large)) == ["HEAD", "PUT"], "a new large blob: HEAD, then PUT"
        assert requests(lambda: store.put(large)) == ["HEAD"], "an existing large blob is not uploaded again"
        with pytest.raises(ValueError):
            requests(lambda: store.get(ArtifactRef(digest="../" + "a" * 61)))
        assert sent == [], "a malformed digest is rejected before any request"
        assert requests(store.check) == ["GET"], "the start-up check is one GET"
    finally:
        store.client.meta.events.unregister("before-send.s3", record)


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
    dead = f"http://127.0.0.1:{_free_port()}"
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", dead)
    _from_url_fails(_url(s3, "p"), "cannot reach", dead, "AWS_ENDPOINT_URL")


def test_from_url_honours_aws_endpoint_url_and_default_region(s3: SeaweedS3, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3")
    monkeypatch.delenv("AWS_REGION")
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3.endpoint)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    store = S3ArtifactStore.from_url(_url(s3, _prefix("generic-endpoint")))
    assert store.endpoint == s3.endpoint and store.client.meta.region_name == "eu-west-1"
    config = store.client.meta.config
    assert (config.connect_timeout, config.read_timeout, config.retries) == (2, 10, {"mode": "standard", "total_max_attempts": 3})
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


def test_a_failing_server_is_tried_three_times_then_the_call_raises(s3: SeaweedS3, monkeypatch: pytest.MonkeyPatch):
    """5xx: botocore's standard mode retries with backoff, three attempts in all, then the call
    raises S3StoreError (and the activity's own retry policy takes over)."""
    import http.server
    import threading

    attempts: list[str] = []

    class Failing(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            attempts.append(self.path)
            body = b"<Error><Code>ServiceUnavailable</Code><Message>down</Message></Error>"
            self.send_response(503)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Failing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        monkeypatch.setenv("AWS_ENDPOINT_URL_S3", f"http://127.0.0.1:{server.server_address[1]}")
        store = S3ArtifactStore(s3.bucket, "failing")
        digest = hashlib.sha256(b"x").hexdigest()
        began = time.monotonic()
        with pytest.raises(S3StoreError, match="ServiceUnavailable.*HTTP 503"):
            store.get(ArtifactRef(digest=digest))
        assert len(attempts) == 3 and time.monotonic() - began < 5, (attempts, time.monotonic() - began)
    finally:
        server.shutdown()
        server.server_close()


# --- answers a real server rarely gives: stubbed ---------------------------------------------------


def _stubbed() -> tuple[S3ArtifactStore, Any]:
    import boto3
    from botocore.stub import Stubber

    client = boto3.session.Session().client("s3", region_name="us-east-1", endpoint_url="http://127.0.0.1:9",
                                            aws_access_key_id="k", aws_secret_access_key="s")
    stub = Stubber(client)
    stub.activate()
    return S3ArtifactStore("bucket", "p", client=client), stub


def test_a_concurrent_conditional_put_is_asked_again():
    store, stub = _stubbed()
    stub.add_client_error("put_object", "ConditionalRequestConflict", http_status_code=409)
    stub.add_client_error("put_object", "PreconditionFailed", http_status_code=412)
    assert store.put(b"raced").digest == hashlib.sha256(b"raced").hexdigest()
    stub.assert_no_pending_responses()


def test_a_server_without_conditional_puts_gets_head_then_put():
    store, stub = _stubbed()
    stub.add_client_error("put_object", "NotImplemented", http_status_code=501)
    stub.add_client_error("head_object", "404", http_status_code=404)
    stub.add_response("put_object", {})
    stub.add_response("head_object", {})  # the next blob exists: nothing uploaded
    store.put(b"first")
    assert store.conditional_put is False
    store.put(b"second")
    stub.assert_no_pending_responses()


def test_other_errors_raise_naming_the_key_and_endpoint():
    store, stub = _stubbed()
    stub.add_client_error("get_object", "AccessDenied", http_status_code=403)
    stub.add_client_error("put_object", "InternalError", http_status_code=500)
    digest = hashlib.sha256(b"x").hexdigest()
    with pytest.raises(S3StoreError, match=f"s3://bucket/p/{digest[:2]}/{digest}.*AccessDenied.*ListBucket"):
        store.get(ArtifactRef(digest=digest))
    with pytest.raises(S3StoreError, match="put of s3://bucket/p/.*http://127.0.0.1:9.*InternalError"):
        store.put(b"x")
