"""Ratchet: a durable runtime for LLM agents on Temporal.

The layers, from the bottom up (an import only points down or sideways within a layer):

- `ratchet.contracts`: the data that crosses Temporal boundaries (pydantic and stdlib only);
- `ratchet.core`: the agent's vocabulary: tools, profiles, idempotency keys, budget arithmetic;
- `ratchet.workflows`: the agent's state machine (deterministic, no I/O);
- `ratchet.stores` and `ratchet.models`: the backends behind protocols (ledger, artifacts,
  transcripts; model providers);
- `ratchet.activities`: every piece of I/O an agent does, built on stores and models;
- `ratchet.payloads` and `ratchet.ops`: the data converter and codecs; settings, logs, metrics,
  tracing, secret redaction;
- `ratchet.plugin` and `ratchet.worker`: the one wiring point (a Temporal plugin) and the worker
  process; `ratchet.cli` and `ratchet.replay`: the `ratchet` command and the deploy gate;
- `ratchet.testing`: test doubles a user's own tests may use (an OpenAI-compatible server).

docs/ARCHITECTURE.md has the picture and a "where to find X" table.
"""
