"""Content-addressed artifact store: blobs named by the sha256 of their bytes.

State and history keep `ArtifactRef`s; the bytes live here. The default store is a directory,
which several workers can share through a common volume. Writes are atomic (temp file + rename)
and idempotent (same bytes, same name), so concurrent writers of one blob cannot corrupt it.
`digests` lists every blob, so a store can be copied to another (`ratchet migrate-stores`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from ratchet.contracts import ArtifactRef


class ArtifactMissing(Exception):
    """A referenced blob is not in the store (wrong store, or deleted)."""


class ArtifactCorrupt(ArtifactMissing):
    """The stored bytes of a blob do not hash to its digest (disk rot, a bad copy, tampering): the
    blob named by the digest is not in the store either, so this is an `ArtifactMissing`, and its
    bytes are never returned."""


class ArtifactStore(Protocol):
    """What the runtime needs from an artifact store (ratchet/testing/stores.py checks it).

    Blobs are named by the lowercase hex sha256 of their bytes. Every method is safe to call from
    several processes (and hosts) on one store at once."""

    def put(self, data: bytes, media_type: str = "application/octet-stream") -> ArtifactRef:
        """Store `data`; return its ref: the sha256 digest, the size, and `media_type` (which
        travels in the ref, not in the store). Idempotent: the same bytes give the same digest
        whatever the media type and however often, or however concurrently, they are put. Atomic:
        a reader never sees part of a blob."""

    def get(self, ref: ArtifactRef) -> bytes:
        """The bytes whose sha256 is `ref.digest` (only the digest is used; size and media type
        may be absent or differ). Raises `ArtifactMissing` naming the digest if the blob is not
        there, `ArtifactCorrupt` if the stored bytes do not hash to the digest, and ValueError if
        the digest is not 64 lowercase hex characters (nothing is read)."""

    def digests(self) -> Iterator[str]:
        """The digest of every blob in the store, each once, in no particular order; nothing that
        is not a whole blob of this store (a write in progress, another prefix's blobs). Blobs put
        while it runs may or may not be included."""


DIGEST = re.compile(r"[0-9a-f]{64}")


class DirectoryArtifactStore:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def _path(self, digest: str) -> Path:
        if not isinstance(digest, str) or not DIGEST.fullmatch(digest):
            raise ValueError(f"not a sha256 digest: {digest!r}")
        return self.root / digest[:2] / digest

    def put(self, data: bytes, media_type: str = "application/octet-stream") -> ArtifactRef:
        digest = hashlib.sha256(data).hexdigest()
        path = self._path(digest)
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
            try:
                with os.fdopen(fd, "wb") as out:
                    out.write(data)
                    out.flush()
                    os.fsync(out.fileno())
                os.replace(tmp, path)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        return ArtifactRef(digest=digest, size=len(data), media_type=media_type)

    def get(self, ref: ArtifactRef) -> bytes:
        try:
            data = self._path(ref.digest).read_bytes()
        except FileNotFoundError:
            raise ArtifactMissing(
                f"artifact {ref.digest} is not in {self.root}; do all workers share the artifact dir?"
            ) from None
        return checked(ref, data, str(self.root))

    def digests(self) -> Iterator[str]:
        for fan in os.scandir(self.root):
            if fan.is_dir() and len(fan.name) == 2:
                for blob in os.scandir(fan.path):  # temp files are `.tmp-*`: not digests
                    if DIGEST.fullmatch(blob.name) and blob.name[:2] == fan.name and blob.is_file():
                        yield blob.name


def put_json(store: ArtifactStore, value: Any) -> ArtifactRef:
    """Keys stay in the order they were written: a tool's parameters reach the model in its
    author's order (`path` before `content`, so a reply cut off mid-call keeps the path). Callers
    whose keys come from an unordered source sort them first (snapshot manifests do)."""
    return store.put(json_bytes(value), "application/json")


def json_bytes(value: Any) -> bytes:
    """The bytes `put_json` stores for `value` (so their digest can be known without storing)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def get_json(store: ArtifactStore, ref: ArtifactRef) -> Any:
    return json.loads(store.get(ref))


def checked(ref: ArtifactRef, data: bytes, where: str) -> bytes:
    """`data` if its sha256 is `ref`'s digest (content addressing: every store checks what it read),
    else ArtifactCorrupt naming where it was read."""
    actual = hashlib.sha256(data).hexdigest()
    if actual != ref.digest:
        raise ArtifactCorrupt(f"artifact {ref.digest} in {where} is corrupt: its {len(data)} bytes hash to {actual}")
    return data
