"""The stores behind RATCHET_LEDGER_URL and RATCHET_ARTIFACT_URL: a URL's scheme picks the backend.

RATCHET_LEDGER_URL:
- `sqlite:///rel/path`, `sqlite:////abs/path`: `SqliteLedger` (one host; SQLAlchemy's form: three
  slashes and a relative path, four and an absolute one);
- `postgresql://user:password@host:port/db` (or `postgres://`): `PostgresLedger` (many hosts; the
  `postgres` extra).

RATCHET_ARTIFACT_URL:
- `file:///abs/dir`, `file:rel/dir`: `DirectoryArtifactStore` (RFC 8089: `file:///srv/x` is `/srv/x`);
- `s3://bucket[/prefix]`: `ObjectArtifactStore` on S3 or an S3-compatible server (the `s3` extra;
  endpoint and credentials from AWS_*);
- `gs://bucket[/prefix]`: `ObjectArtifactStore` on Google Cloud Storage (the `gcs` extra;
  credentials from GOOGLE_*);
- `az://container[/prefix]`: `ObjectArtifactStore` on Azure Blob Storage (the `azure` extra;
  account and credentials from AZURE_*).

Unset, the URLs come from RATCHET_LEDGER_PATH and RATCHET_ARTIFACT_DIR (`Settings.ledger_store_url`,
`Settings.artifact_store_url`), so a setup without them works as before. Paths are percent-decoded
(`%20` is a space, `%23` a `#`). A URL that names no known store raises `SettingsError` naming the
variable; a password in it is masked in every message (`ratchet.core.settings_errors.mask_url`).

Backends beyond SQLite and directories are imported only when their scheme is used, so their
client libraries are optional extras.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any
from urllib.parse import SplitResult, unquote, urlsplit

from ratchet.core.settings_errors import SettingsError, mask_url
from ratchet.stores.artifacts import ArtifactStore, DirectoryArtifactStore
from ratchet.stores.ledger import Ledger, SqliteLedger

__all__ = ["ARTIFACT_SETTING", "LEDGER_SETTING", "artifact_dir", "ledger_path", "open_artifacts", "open_ledger"]

LEDGER_SETTING = "RATCHET_LEDGER_URL"
ARTIFACT_SETTING = "RATCHET_ARTIFACT_URL"
LEDGER_FORMS = "sqlite:///RELATIVE/PATH, sqlite:////ABSOLUTE/PATH or postgresql://USER:PASSWORD@HOST:PORT/DATABASE"
ARTIFACT_FORMS = (
    "file:///ABSOLUTE/DIR, file:RELATIVE/DIR, s3://BUCKET[/PREFIX], gs://BUCKET[/PREFIX] or az://CONTAINER[/PREFIX]"
)
OBJECT_STORE_EXTRAS = {"s3": "s3", "gs": "gcs", "az": "azure"}
"""Artifact URL scheme -> the extra that installs its client (obstore for all three)."""
POSTGRES_SCHEMES = ("postgresql", "postgres")


def open_ledger(url: str) -> Ledger:
    """The idempotency ledger at `url` (RATCHET_LEDGER_URL). A Postgres ledger is connected, and
    its tables created, before this returns: a bad URL, an unreachable server or wrong credentials
    raise `SettingsError` naming RATCHET_LEDGER_URL."""
    scheme = _scheme(url, LEDGER_SETTING, LEDGER_FORMS)
    if scheme == "sqlite":
        return SqliteLedger(ledger_path(url))
    if scheme in POSTGRES_SCHEMES:
        backend = _backend(
            url, LEDGER_SETTING, f"a {scheme}:// URL needs the Postgres ledger", "postgres_ledger", "PostgresLedger"
        )
        return backend.from_url(url)
    raise _bad(url, LEDGER_SETTING, f"unknown scheme {scheme!r}", LEDGER_FORMS)


def open_artifacts(url: str) -> ArtifactStore:
    """The artifact store at `url` (RATCHET_ARTIFACT_URL); an object store (S3, GCS, Azure) is
    checked with one request before this returns. A bad URL raises `SettingsError` naming
    RATCHET_ARTIFACT_URL."""
    scheme = _scheme(url, ARTIFACT_SETTING, ARTIFACT_FORMS)
    if scheme == "file":
        return DirectoryArtifactStore(artifact_dir(url))
    if scheme in OBJECT_STORE_EXTRAS:
        extra = OBJECT_STORE_EXTRAS[scheme]
        needs = f"a {scheme}:// URL needs `pip install 'ratchet-agents[{extra}]'` for the object artifact store"
        backend = _backend(url, ARTIFACT_SETTING, needs, "object_artifacts", "ObjectArtifactStore")
        return backend.from_url(url)
    raise _bad(url, ARTIFACT_SETTING, f"unknown scheme {scheme!r}", ARTIFACT_FORMS)


def _backend(url: str, setting: str, needs: str, module: str, name: str) -> Any:
    """Backend class `name` of `ratchet.stores.<module>`, imported only when its scheme is used (its
    client library is an optional extra); a clear `SettingsError` naming `setting` if it is missing."""
    try:
        return getattr(importlib.import_module(f"ratchet.stores.{module}"), name)
    except ImportError as exc:
        raise SettingsError(
            f"{setting}={mask_url(url)!r}: {needs} (ratchet.stores.{module}), which cannot be imported: {exc}"
        ) from None


def ledger_path(url: str) -> Path:
    """The file of a `sqlite:///...` URL: what follows `sqlite:///`, percent-decoded (SQLAlchemy's
    convention: `sqlite:///ledger.sqlite3` is relative, `sqlite:////var/lib/ledger.sqlite3` absolute)."""
    parts = _split(url, LEDGER_SETTING, LEDGER_FORMS)
    if parts.scheme.lower() != "sqlite":
        raise _bad(url, LEDGER_SETTING, "not a sqlite:// URL", LEDGER_FORMS)
    if parts.netloc or not parts.path.startswith("/"):
        raise _bad(url, LEDGER_SETTING, "a sqlite URL has three slashes and then the path", LEDGER_FORMS)
    return Path(_path(url, parts.path[1:], LEDGER_SETTING, LEDGER_FORMS))


def artifact_dir(url: str) -> Path:
    """The directory of a `file:` URL: `file:///abs/dir` (or `file://localhost/abs/dir`) is
    absolute, `file:rel/dir` relative; percent-decoded."""
    parts = _split(url, ARTIFACT_SETTING, ARTIFACT_FORMS)
    if parts.scheme.lower() != "file":
        raise _bad(url, ARTIFACT_SETTING, "not a file: URL", ARTIFACT_FORMS)
    if parts.netloc not in ("", "localhost"):
        raise _bad(
            url, ARTIFACT_SETTING, f"host {parts.netloc!r}: a file URL names a directory on this host", ARTIFACT_FORMS
        )
    return Path(_path(url, parts.path, ARTIFACT_SETTING, ARTIFACT_FORMS))


def _scheme(url: str, setting: str, forms: str) -> str:
    return _split(url, setting, forms).scheme.lower()


def _split(url: str, setting: str, forms: str) -> SplitResult:
    if not isinstance(url, str) or not url.strip():
        raise _bad(str(url), setting, "empty", forms)
    if url != url.strip() or any(ord(c) < 32 for c in url):
        raise _bad(url, setting, "leading or trailing spaces, or control characters", forms)
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise _bad(url, setting, str(exc), forms) from None
    if not parts.scheme or len(parts.scheme) < 2:  # `C:\\...` or a bare path
        raise _bad(url, setting, "not a URL (no scheme)", forms)
    return parts


def _path(url: str, raw: str, setting: str, forms: str) -> str:
    parts = urlsplit(url)
    if parts.query or parts.fragment or "?" in url or "#" in url:
        raise _bad(url, setting, "no query or fragment allowed (a `?` or `#` in the path is written %3F, %23)", forms)
    try:
        path = unquote(raw, errors="strict")
    except UnicodeDecodeError:
        raise _bad(url, setting, "its %-escapes are not UTF-8", forms) from None
    if not path or "\x00" in path:
        raise _bad(url, setting, "no path", forms)
    return path


def _bad(url: str, setting: str, why: str, forms: str) -> SettingsError:
    return SettingsError(f"{setting}={mask_url(url)!r}: {why}; expected {forms}")
