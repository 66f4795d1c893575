"""A long run's archived effects, read back from the artifact store (written by the `effects.archive`
activity, activities/archive.py; workflows/effects_archive.py decides what leaves the handover).

A segment is `{"prev": DIGEST | null, "effects": [...]}`, content-addressed; the run's
`effects.archive` names the newest, and each names the one before it.
"""

from __future__ import annotations

from ratchet.contracts import ArtifactRef, Effect
from ratchet.stores.artifacts import ArtifactStore, get_json


def load_archived(artifacts: ArtifactStore, digest: str | None) -> list[Effect]:
    """Every effect of the archive chain ending at `digest`, oldest first (none for None)."""
    segments = []
    while digest is not None:
        segment = get_json(artifacts, ArtifactRef.json(digest))
        segments.append(segment["effects"])
        digest = segment["prev"]
    return [Effect.model_validate(e) for effects in reversed(segments) for e in effects]
