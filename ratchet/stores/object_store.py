"""Where an object store's blobs are and how obstore reaches them: RATCHET_ARTIFACT_URL parsed into
a `Location` (`s3://`, `gs://`, `az://`), and the obstore store of its bucket configured as the
service's own SDKs are (the list in ratchet/stores/object_artifacts.py's docstring), with its
timeouts and retries."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import obstore
from obstore.store import AzureStore, GCSStore, S3Store

if TYPE_CHECKING:
    from obstore.store import BackoffConfig, ClientConfig, RetryConfig

from ratchet.core.settings_errors import SettingsError, mask_url
from ratchet.stores import object_errors

SETTING = "RATCHET_ARTIFACT_URL"
FORMS = "s3://BUCKET[/PREFIX], gs://BUCKET[/PREFIX] or az://CONTAINER[/PREFIX]"
CONNECT_TIMEOUT = timedelta(seconds=2)
READ_TIMEOUT = timedelta(seconds=10)
REQUEST_TIMEOUT = timedelta(minutes=5)
"""A whole request, a large upload included (obstore's default, 30 s, would cut one off)."""
RETRY_TIMEOUT_S = 10.0
"""How long a request without a usable answer is asked again before the call raises."""
MAX_RETRIES = 10
_BACKOFF: BackoffConfig = {"init_backoff": timedelta(milliseconds=100), "max_backoff": timedelta(seconds=1), "base": 2}


@dataclass(frozen=True)
class Service:
    name: str
    bucket: str
    """What the service calls a bucket."""
    names: re.Pattern[str]
    credentials: str
    endpoint: str
    permissions: str
    extra: str


_BUCKET = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{1,253}[A-Za-z0-9]")
SCHEMES = {
    "s3": Service(
        "S3",
        "bucket",
        _BUCKET,
        "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, name a profile of ~/.aws/config or ~/.aws/credentials "
        "with AWS_PROFILE (`aws sso login` first for an SSO one), or run with a web identity, container or "
        "instance role",
        "AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL",
        "s3:GetObject, s3:PutObject and s3:ListBucket",
        "s3",
    ),
    "gs": Service(
        "GCS",
        "bucket",
        _BUCKET,
        "set GOOGLE_APPLICATION_CREDENTIALS (a service account key file), or run as a service account",
        "GOOGLE_BASE_URL",
        "storage.objects.get, storage.objects.create and storage.objects.list",
        "gcs",
    ),
    "az": Service(
        "Azure",
        "container",
        re.compile(r"[a-z0-9](?:[a-z0-9]|-(?=[a-z0-9])){2,62}"),
        "set AZURE_STORAGE_ACCOUNT_NAME and AZURE_STORAGE_ACCOUNT_KEY (or AZURE_STORAGE_SAS_TOKEN, a client "
        "secret, a managed identity)",
        "AZURE_STORAGE_ENDPOINT",
        "read, write and list on the container (Storage Blob Data Contributor)",
        "azure",
    ),
}
_AWS_ENDPOINTS = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_ENDPOINT")
"""The variables obstore takes an S3 endpoint from."""
_HOST_NAME = re.compile(r"[a-z0-9][a-z0-9-]{1,61}[a-z0-9]")
"""A bucket name that can be the first label of `BUCKET.s3.REGION.amazonaws.com`: no dot (which
the certificate's wildcard would not match), no capital."""


@dataclass(frozen=True)
class Location:
    """Where the blobs are: `scheme://bucket/prefix` (prefix without surrounding slashes)."""

    scheme: str
    bucket: str
    prefix: str = ""

    @property
    def service(self) -> Service:
        return SCHEMES[self.scheme]

    def url(self, key: str = "") -> str:
        return f"{self.scheme}://{self.bucket}/{key or self.prefix}"


def parse_url(url: str) -> Location:
    """`s3://bucket[/prefix]`, `gs://bucket[/prefix]` or `az://container[/prefix]`; SettingsError
    naming RATCHET_ARTIFACT_URL for anything else (a password in it masked)."""

    def bad(why: str) -> SettingsError:
        return SettingsError(f"{SETTING}={mask_url(url)!r}: {why}; expected {FORMS}")

    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise bad(str(exc)) from None
    service = SCHEMES.get(parts.scheme)
    if service is None:
        raise bad("not an s3://, gs:// or az:// URL")
    if parts.query or parts.fragment or "?" in url or "#" in url:
        raise bad(f"no query or fragment allowed (the endpoint and credentials come from {service.name}'s variables)")
    if "@" in parts.netloc or ":" in parts.netloc:
        raise bad(f"no credentials or port in the URL (they come from {service.name}'s variables)")
    if not service.names.fullmatch(parts.netloc):
        raise bad(f"{parts.netloc!r} is not a valid {service.name} {service.bucket} name")
    prefix = parts.path.strip("/")
    if prefix:
        segments = prefix.split("/")
        if any(s in ("", ".", "..") for s in segments) or any(ord(c) < 32 for c in prefix):
            raise bad(f"prefix {prefix!r} has an empty, '.' or '..' segment or a control character")
    return Location(parts.scheme, parts.netloc, prefix)


def open_object_store(
    location: Location, *, retry_timeout_s: float = RETRY_TIMEOUT_S, max_retries: int = MAX_RETRIES, **config: Any
) -> Any:
    """The obstore store of `location`'s bucket, configured from the environment (the list in the
    module docstring), `config` (obstore's S3Config, GCSConfig or AzureConfig keys) overriding it;
    requests without a usable answer asked again up to `max_retries` times within `retry_timeout_s`.
    An http:// endpoint is used as given (obstore refuses one unless told). S3 keys in `config`
    (`access_key_id`) are used instead of botocore's chain."""
    client: ClientConfig = {
        "allow_http": True,
        "connect_timeout": CONNECT_TIMEOUT,
        "read_timeout": READ_TIMEOUT,
        "timeout": REQUEST_TIMEOUT,
    }
    retry: RetryConfig = {
        "max_retries": max_retries,
        "retry_timeout": timedelta(seconds=retry_timeout_s),
        "backoff": _BACKOFF,
    }
    try:
        if location.scheme == "s3":
            return _s3_store(location, client, retry, config)
        if location.scheme == "gs":
            return GCSStore(location.bucket, client_options=client, retry_config=retry, **config)
        return AzureStore(location.bucket, client_options=client, retry_config=retry, **config)
    except (obstore.exceptions.BaseError, OSError, ValueError) as exc:
        raise SettingsError(
            f"{SETTING}={location.url()!r}: {location.service.name} is not configured ({object_errors.summary(exc)}): "
            f"{location.service.credentials}"
        ) from None


def _s3_store(location: Location, client: ClientConfig, retry: RetryConfig, config: dict[str, Any]) -> S3Store:
    """S3Store with botocore's credential chain (ratchet/stores/aws_credentials.py); on AWS (no
    endpoint set) virtual-hosted-style requests for a bucket whose name can be a host name, as AWS
    recommends, else path-style; AWS_VIRTUAL_HOSTED_STYLE_REQUEST or `config` decide over both."""
    try:
        from ratchet.stores.aws_credentials import AwsCredentials
    except ImportError as exc:
        raise ValueError(f"{exc.name} is missing: pip install 'ratchet-agents[s3]'") from None
    if os.environ.get("AWS_CA_BUNDLE"):
        client["root_certificate"] = Path(os.environ["AWS_CA_BUNDLE"]).read_bytes()
    keys = any("access_key_id" in key for key in config)  # given keys decide over the chain
    credentials = None if keys else AwsCredentials.from_chain()
    options: dict[str, Any] = {"checksum_algorithm": "SHA256"}
    if credentials and credentials.region:
        options["region"] = credentials.region
    endpoint = any(os.environ.get(name) for name in _AWS_ENDPOINTS) or any("endpoint" in key for key in config)
    if not endpoint and "AWS_VIRTUAL_HOSTED_STYLE_REQUEST" not in os.environ and _HOST_NAME.fullmatch(location.bucket):
        options["virtual_hosted_style_request"] = True
    return S3Store(
        location.bucket,
        client_options=client,
        retry_config=retry,
        credential_provider=credentials,
        **{**options, **config},
    )
