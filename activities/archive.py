"""What a long run's handover leaves in the artifact store, and the way back (workflows/effects_archive.py).

`effects.archive` and `effects.load`: a long run's older effects.

At a continue-as-new the effects below the last checkpoint leave the handover (workflows/effects_archive.py):
they are written here as a segment `{"prev": DIGEST | null, "effects": [...]}`, content-addressed,
so a retried archive writes the same blob. `load` follows the chain back and returns every
archived effect, oldest first. Segments are never changed: the run restores them into its state
before any rollback that reaches below the last checkpoint.

`transcript.messages`: messages of the conversation from the transcript artifact, for a rollback
to (or a fork from) a checkpoint older than what the handover kept.
"""

from __future__ import annotations

import asyncio

from temporalio import activity

from ratchet.contracts.activities import EFFECTS_ARCHIVE, EFFECTS_LOAD, TRANSCRIPT_MESSAGES
from ratchet.contracts import ArchiveEffects, Effect, Message, TranscriptSlice
from ratchet.stores import transcripts
from ratchet.stores.archived_effects import load_archived
from ratchet.stores.artifacts import ArtifactStore, put_json


class Archive:
    def __init__(self, artifacts: ArtifactStore) -> None:
        self.artifacts = artifacts

    @activity.defn(name=EFFECTS_ARCHIVE.name)
    async def archive(self, req: ArchiveEffects) -> str:
        segment = {"prev": req.prev, "effects": [e.model_dump(mode="json") for e in req.effects]}
        return (await asyncio.to_thread(put_json, self.artifacts, segment)).digest

    @activity.defn(name=EFFECTS_LOAD.name)
    async def load(self, digest: str) -> list[Effect]:
        return await asyncio.to_thread(load_archived, self.artifacts, digest)

    @activity.defn(name=TRANSCRIPT_MESSAGES.name)
    async def messages(self, req: TranscriptSlice) -> list[Message]:
        return await asyncio.to_thread(transcript_slice, self.artifacts, req)


def transcript_slice(artifacts: ArtifactStore, req: TranscriptSlice) -> list[Message]:
    """Messages `req.start` to `req.stop` of the conversation the transcript `req.digest` holds."""
    return transcripts.read_all(artifacts, req.digest)[req.start : req.stop]
