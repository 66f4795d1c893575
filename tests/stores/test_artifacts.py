"""DirectoryArtifactStore: the ArtifactStore conformance suite (ratchet/testing/stores.py), then
what only the directory layout has."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest

from ratchet.stores.artifacts import DirectoryArtifactStore
from ratchet.testing.stores import ArtifactStoreConformance


def _tamper(root: Path, digest: str, data: bytes) -> None:
    (root / digest[:2] / digest).write_bytes(data)


@pytest.mark.parametrize("check", ArtifactStoreConformance.checks())
def test_conformance(check: str, tmp_path: Path):
    root = tmp_path / "artifacts"
    ArtifactStoreConformance(partial(DirectoryArtifactStore, root), partial(_tamper, root)).run(check)


def test_blobs_live_under_a_two_character_fan_out_and_leave_no_temp_files(tmp_path: Path):
    store = DirectoryArtifactStore(tmp_path)
    ref = store.put(b"x" * 1000)
    store.put(b"x" * 1000)
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == [
        ref.digest[:2], f"{ref.digest[:2]}/{ref.digest}"
    ]
