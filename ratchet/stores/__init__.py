"""Durable stores outside Temporal's history: the idempotency ledger (`ledger.Ledger`: side effects
by key, so a retry neither repeats nor loses one), the content-addressed artifact store
(`artifacts.ArtifactStore`: blobs named by their sha256, so history carries only refs) and the
transcripts kept in it (`transcripts`). Each store is a protocol listing exactly what the runtime
calls, a reference implementation for one host (`SqliteLedger`, `DirectoryArtifactStore`), and a
conformance suite in `ratchet.testing.stores` that any other backend (Postgres, S3) runs unchanged
against a factory of its own; the suites go through the protocol only. `migrate` (`ratchet
migrate-stores`) copies a ledger and an artifact store to other backends through the same protocols.
"""
