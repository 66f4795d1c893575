"""Model providers behind one protocol (`ModelProvider`): `openai` (any OpenAI-compatible endpoint)
and `scripted` (deterministic replies, for tests and demos), registered by name on the worker."""
