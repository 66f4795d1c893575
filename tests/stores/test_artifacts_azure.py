"""ObjectArtifactStore on Azure Blob Storage against Azurite (tests/azurite_server.py): the
ArtifactStore conformance suite and the start-up check; then gs://, which has no emulator here:
its URLs parse, and a store without credentials fails at start naming what to set."""

from __future__ import annotations

import time
import uuid
from functools import partial
from typing import TYPE_CHECKING, Any

import pytest

from ratchet.ops.settings import SettingsError
from ratchet.stores.object_artifacts import Location, ObjectArtifactStore, parse_url
from ratchet.stores.urls import open_artifacts
from ratchet.testing.stores import ArtifactStoreConformance

pytestmark = pytest.mark.e2e  # slow: `make test-e2e`, not `make test`

if TYPE_CHECKING:
    from tests.azurite_server import Azurite


_AZURE_VARIABLES = ("AZURE_STORAGE_USE_EMULATOR", "AZURE_STORAGE_SAS_TOKEN", "AZURE_STORAGE_TOKEN", "AZURE_CLIENT_ID")


@pytest.fixture
def azure(azurite_server: Azurite, monkeypatch: pytest.MonkeyPatch) -> Azurite:
    """The server, with the AZURE_* variables pointing at it (spawned processes inherit them)."""
    for name in _AZURE_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    for name, value in azurite_server.env().items():
        monkeypatch.setenv(name, value)
    return azurite_server


def _url(server: Azurite, prefix: str) -> str:
    return f"az://{server.container}/{prefix}"


def _tamper(server: Azurite, prefix: str, digest: str, data: bytes) -> None:
    server.client().upload_blob(f"{prefix}/{digest[:2]}/{digest}", data, overwrite=True)


@pytest.mark.parametrize("check", ArtifactStoreConformance.checks())
def test_conformance(check: str, azure: Azurite):
    prefix = f"conformance/{uuid.uuid4().hex[:12]}"
    ArtifactStoreConformance(partial(ObjectArtifactStore.from_url, _url(azure, prefix)),
                             partial(_tamper, azure, prefix)).run(check)


def test_blobs_live_at_prefix_fan_out_digest_and_a_second_put_writes_nothing(azure: Azurite):
    prefix = f"layout/{uuid.uuid4().hex[:12]}"
    store = open_artifacts(_url(azure, prefix))
    assert isinstance(store, ObjectArtifactStore)
    ref = store.put(b"x" * 1000)
    written = azure.client().get_blob_client(store.key(ref.digest)).get_blob_properties().etag
    store.put(b"x" * 1000, "text/plain")
    assert azure.client().get_blob_client(store.key(ref.digest)).get_blob_properties().etag == written
    assert sorted(b.name for b in azure.client().list_blobs(name_starts_with=f"{prefix}/")) == [
        f"{prefix}/{ref.digest[:2]}/{ref.digest}"
    ]


def _fails(url: str, *needles: str, **config: Any) -> str:
    began = time.monotonic()
    with pytest.raises(SettingsError) as failed:
        ObjectArtifactStore.from_url(url, **config)
    message = str(failed.value)
    assert message.startswith(f"RATCHET_ARTIFACT_URL={url!r}: "), message
    for needle in needles:
        assert needle in message, f"{needle!r} not in: {message}"
    assert time.monotonic() - began < 10, f"took {time.monotonic() - began:.1f}s to fail"
    return message


def test_a_missing_container_is_named(azure: Azurite):
    _fails("az://ratchet-no-such-container/p", "container 'ratchet-no-such-container' does not exist", azure.endpoint)


def test_a_wrong_account_key_is_refused_at_start(azure: Azurite, monkeypatch: pytest.MonkeyPatch):
    """Azurite answers a wrong key 403 AuthorizationFailure (Azure itself AuthenticationFailed, which
    the message calls rejected credentials)."""
    monkeypatch.setenv("AZURE_STORAGE_ACCOUNT_KEY", "bm90IHRoZSBrZXk=")
    _fails(_url(azure, "p"), "access to container 'ratchet-test' is denied (AuthorizationFailure", azure.endpoint,
           "Storage Blob Data Contributor")


def test_an_azure_url_without_an_account_names_the_variables(monkeypatch: pytest.MonkeyPatch):
    for name in ("AZURE_STORAGE_ACCOUNT_NAME", "AZURE_STORAGE_ENDPOINT", *_AZURE_VARIABLES):
        monkeypatch.delenv(name, raising=False)
    _fails("az://container/p", "Azure is not configured", "AZURE_STORAGE_ACCOUNT_NAME")


# --- gs:// ----------------------------------------------------------------------------------------


def test_gs_and_az_urls_parse():
    assert parse_url("gs://my-bucket/runs/prod/") == Location("gs", "my-bucket", "runs/prod")
    assert parse_url("gs://my.bucket") == Location("gs", "my.bucket", "")
    assert parse_url("az://artifacts/a/b") == Location("az", "artifacts", "a/b")


def test_a_gs_url_without_credentials_fails_at_start_naming_them(tmp_path, monkeypatch: pytest.MonkeyPatch):
    """No key file, no application default credentials: obstore asks the instance metadata server,
    which is not there (or refuses) off Google Cloud."""
    for name in ("GOOGLE_SERVICE_ACCOUNT", "GOOGLE_SERVICE_ACCOUNT_PATH", "GOOGLE_SERVICE_ACCOUNT_KEY",
                 "GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_BEARER_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.config/gcloud/application_default_credentials.json
    _fails("gs://ratchet-bucket/p", "no GCS credentials", "GOOGLE_APPLICATION_CREDENTIALS", retry_timeout_s=1.0)


def test_a_gs_key_file_that_is_missing_is_named(tmp_path, monkeypatch: pytest.MonkeyPatch):
    missing = tmp_path / "no-such-key.json"
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(missing))
    _fails("gs://ratchet-bucket/p", "GCS", "GOOGLE_APPLICATION_CREDENTIALS")
