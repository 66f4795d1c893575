"""ObjectArtifactStore on S3 as AWS users configure it: credentials from botocore's chain (a named
profile in the shared files, a credential_process) against a real S3-compatible server (SeaweedFS,
tests/s3_server.py), and the addressing style of the requests (virtual-hosted on AWS, path-style
for an endpoint), read off the URLs obstore signs."""

from __future__ import annotations

import sys
import uuid
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import obstore
import pytest

from ratchet.ops.settings import SettingsError
from ratchet.stores.aws_credentials import AwsCredentials
from ratchet.stores.object_artifacts import Location, ObjectArtifactStore, open_object_store

if TYPE_CHECKING:
    from tests.s3_server import SeaweedS3


_AWS = ("AWS_ENDPOINT_URL", "AWS_ENDPOINT", "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_SESSION_TOKEN",
        "AWS_VIRTUAL_HOSTED_STYLE_REQUEST", "AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE")


@pytest.fixture
def s3(s3_server: SeaweedS3, monkeypatch: pytest.MonkeyPatch) -> SeaweedS3:
    """The server's endpoint in the environment, its keys not: they come from a profile."""
    for name in _AWS:
        monkeypatch.delenv(name, raising=False)
    for name, value in s3_server.env().items():
        monkeypatch.setenv(name, value)
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION"):
        monkeypatch.delenv(name)
    return s3_server


@pytest.fixture
def provider_calls(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Each time obstore asks the store's credential provider for credentials."""
    calls: list[object] = []
    ask = AwsCredentials.__call__
    monkeypatch.setattr(AwsCredentials, "__call__", lambda self: calls.append(self) or ask(self))
    return calls


def _profile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, credentials: str, config: str) -> Path:
    """`name` as AWS_PROFILE, with these sections in fresh shared credentials and config files."""
    (tmp_path / "credentials").write_text(credentials)
    (tmp_path / "config").write_text(config)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_PROFILE", name)
    return tmp_path / "credentials"


def _url(server: SeaweedS3) -> str:
    return f"s3://{server.bucket}/aws/{uuid.uuid4().hex[:12]}"


def _round_trips(store: ObjectArtifactStore, n: int) -> None:
    for i in range(n):
        data = f"blob {i} of {store.location.prefix}".encode()
        assert store.get(store.put(data)) == data


def _signed(store: ObjectArtifactStore) -> str:
    """The URL obstore would send a GET of the store's empty blob to (signed, query and all)."""
    return obstore.sign(store.store, "GET", store.key("0" * 64), timedelta(minutes=1))


def test_a_named_profile_s_keys_and_region_are_used(
    s3: SeaweedS3, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, provider_calls: list[object]
):
    """AWS_PROFILE names a profile of the shared credentials file, its region in the config file;
    the default profile (other keys) is not used; obstore asks for the keys once, not per request."""
    _profile(tmp_path, monkeypatch, "ratchet-ci",
             f"[default]\naws_access_key_id = nobody\naws_secret_access_key = wrong\n\n"
             f"[ratchet-ci]\naws_access_key_id = {s3.access_key}\naws_secret_access_key = {s3.secret_key}\n",
             "[default]\nregion = us-west-2\n\n[profile ratchet-ci]\nregion = eu-west-1\n")
    store = ObjectArtifactStore.from_url(_url(s3))
    _round_trips(store, 10)
    assert f"X-Amz-Credential={s3.access_key}%2F" in _signed(store) and "%2Feu-west-1%2Fs3%2F" in _signed(store)
    assert len(provider_calls) == 1, "static keys never expire: asked for once"


def test_a_profile_whose_keys_are_wrong_is_named(s3: SeaweedS3, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    credentials = _profile(tmp_path, monkeypatch, "ratchet-stale",
                           f"[ratchet-stale]\naws_access_key_id = {s3.access_key}\naws_secret_access_key = stale\n", "")
    with pytest.raises(SettingsError) as failed:
        ObjectArtifactStore.from_url(_url(s3))
    message = str(failed.value)
    assert "RATCHET_ARTIFACT_URL" in message and "(SignatureDoesNotMatch)" in message, message
    source = f"the credentials of AWS profile 'ratchet-stale' (shared-credentials-file, {credentials})"
    assert f"rejected {source}" in message, message


def test_a_missing_profile_is_named_without_a_request(s3: SeaweedS3, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    _profile(tmp_path, monkeypatch, "ratchet-nowhere", "[other]\naws_access_key_id = a\naws_secret_access_key = b\n",
             "")
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:9")  # nothing answers there
    with pytest.raises(SettingsError) as failed:
        ObjectArtifactStore.from_url(_url(s3))
    message = str(failed.value)
    assert "S3 is not configured" in message and "The config profile (ratchet-nowhere) could not be found" in message
    assert "AWS_PROFILE" in message, message


def test_credentials_that_expire_come_from_the_profile_s_process_and_are_cached(
    s3: SeaweedS3, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, provider_calls: list[object]
):
    """A credential_process (as `aws sso` or a vault helper configures one) with an expiry: run
    once at start, its keys used for every request, and obstore asks the provider for them once (it
would ask every 0.1 s for credentials that expire within 5 minutes)."""
    runs = tmp_path / "runs"
    script = tmp_path / "credentials.py"
    answer = {"Version": 1, "AccessKeyId": s3.access_key, "SecretAccessKey": s3.secret_key,
              "Expiration": "2099-01-01T00:00:00Z"}
    script.write_text(f"import json, sys\nopen({str(runs)!r}, 'a').write('run\\n')\nprint(json.dumps({answer!r}))\n")
    _profile(tmp_path, monkeypatch, "ratchet-process", "",
             f"[profile ratchet-process]\ncredential_process = {sys.executable} {script}\n")
    store = ObjectArtifactStore.from_url(_url(s3))
    _round_trips(store, 10)
    assert runs.read_text().splitlines() == ["run"]
    assert len(provider_calls) == 1, provider_calls
    assert "credentials of AWS profile 'ratchet-process' (custom-process" in repr(store.store.credential_provider)


def test_a_failing_credential_process_is_named(s3: SeaweedS3, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    _profile(tmp_path, monkeypatch, "ratchet-broken", "",
             f"[profile ratchet-broken]\ncredential_process = {sys.executable} -c \"raise SystemExit('token gone')\"\n")
    with pytest.raises(SettingsError, match=r"AWS profile 'ratchet-broken': .*custom-process: token gone"):
        ObjectArtifactStore.from_url(_url(s3))


def test_keys_given_in_the_config_are_used_instead_of_the_chain(
    s3: SeaweedS3, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    _profile(tmp_path, monkeypatch, "ratchet-other",
             "[ratchet-other]\naws_access_key_id = nobody\naws_secret_access_key = wrong\n", "")
    store = ObjectArtifactStore.from_url(_url(s3), **s3.store_config())
    _round_trips(store, 1)
    assert store.store.credential_provider is None


# --- addressing: virtual-hosted-style on AWS, path-style for an endpoint ---------------------------


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Keys in the environment, no endpoint: AWS itself (nothing is sent; URLs are only signed)."""
    for name in (*_AWS, "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(name, raising=False)
    for name, value in {"AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "secret",
                        "AWS_REGION": "eu-west-1", "AWS_EC2_METADATA_DISABLED": "true",
                        "AWS_CONFIG_FILE": str(tmp_path / "none"),
                        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none")}.items():
        monkeypatch.setenv(name, value)


def _base(bucket: str) -> str:
    """Scheme, host and path up to the key of a request for `bucket`'s key `k`."""
    store = ObjectArtifactStore(Location("s3", bucket), open_object_store(Location("s3", bucket)))
    return obstore.sign(store.store, "GET", "k", timedelta(minutes=1)).partition("?")[0].removesuffix("k")


@pytest.mark.usefixtures("aws")
@pytest.mark.parametrize(("bucket", "base"), [
    ("ratchet-artifacts", "https://ratchet-artifacts.s3.eu-west-1.amazonaws.com/"),
    ("a1b", "https://a1b.s3.eu-west-1.amazonaws.com/"),
    ("ratchet.artifacts.example.com", "https://s3.eu-west-1.amazonaws.com/ratchet.artifacts.example.com/"),
    ("Legacy_Bucket", "https://s3.eu-west-1.amazonaws.com/Legacy_Bucket/"),
])
def test_aws_is_addressed_virtual_hosted_style_unless_the_name_cannot_be_a_host(bucket: str, base: str):
    assert _base(bucket) == base


@pytest.mark.usefixtures("aws")
@pytest.mark.parametrize("variable", ["AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_ENDPOINT"])
def test_an_endpoint_is_addressed_path_style(variable: str, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(variable, "http://127.0.0.1:9000")
    assert _base("ratchet-artifacts") == "http://127.0.0.1:9000/ratchet-artifacts/"


@pytest.mark.usefixtures("aws")
def test_aws_virtual_hosted_style_request_decides_over_both(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("AWS_VIRTUAL_HOSTED_STYLE_REQUEST", "false")
    assert _base("ratchet-artifacts") == "https://s3.eu-west-1.amazonaws.com/ratchet-artifacts/"
    monkeypatch.setenv("AWS_VIRTUAL_HOSTED_STYLE_REQUEST", "true")
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "https://ratchet-artifacts.s3.example.com")  # the bucket in its host
    assert _base("ratchet-artifacts") == "https://ratchet-artifacts.s3.example.com/"


@pytest.mark.usefixtures("aws")
def test_an_endpoint_in_the_config_is_addressed_path_style():
    location = Location("s3", "ratchet-artifacts")
    store = open_object_store(location, endpoint="http://127.0.0.1:9000")
    assert obstore.sign(store, "GET", "k", timedelta(minutes=1)).startswith("http://127.0.0.1:9000/ratchet-artifacts/k?")
