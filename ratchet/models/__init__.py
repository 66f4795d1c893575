"""Model providers behind one protocol (`ModelProvider`): `openai` (any OpenAI-compatible endpoint),
`anthropic` (Anthropic's Messages API, the `anthropic` extra) and `scripted` (deterministic replies,
for tests and demos), registered by name on the worker, each with its own settings."""
